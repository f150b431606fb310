-- reliable-mail schema version 12: unsubscribes
begin;
create table reliable_mail.mail_unsubscribe (
        "address" text not null,
        "category" text not null,
        "outbox_id" uuid null,
        "created_at" timestamptz not null default now(),
        primary key ("address", "category")
      );
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 12, 'unsubscribes', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
