-- reliable-mail schema version 11: attempt-transport
begin;
alter table reliable_mail.mail_outbox_attempt add column "transport" text null;
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 11, 'attempt-transport', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
