-- reliable-mail schema version 6: request-message-ids
begin;
alter table reliable_mail.mail_outbox add column "provider_message_ids" text[] null;
create index "mail_outbox_provider_message_ids_index" on reliable_mail.mail_outbox using gin ("provider_message_ids") where "provider_message_ids" is not null;
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 6, 'request-message-ids', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
