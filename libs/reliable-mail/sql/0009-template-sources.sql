-- reliable-mail schema version 9: template-sources
begin;
create table reliable_mail.mail_template_source (
        "name" text not null,
        "version" text not null,
        "sources" jsonb not null,
        "created_at" timestamptz not null default now(),
        primary key ("name", "version")
      );
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 9, 'template-sources', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
