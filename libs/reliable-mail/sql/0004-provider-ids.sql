-- reliable-mail schema version 4: provider-ids
begin;
alter table reliable_mail.mail_outbox add column "provider_request_id" text null;
alter table reliable_mail.mail_outbox add column "provider_accepted_at" timestamptz null;
alter table reliable_mail.mail_outbox_attempt add column "provider_request_id" text null;
alter table reliable_mail.mail_outbox_attempt add column "provider_accepted_at" timestamptz null;
alter table reliable_mail.mail_outbox_attempt add column "deduplicated_by_key" boolean not null default false;
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 4, 'provider-ids', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
