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
   values (12, 'unsubscribes', 1);
commit;
