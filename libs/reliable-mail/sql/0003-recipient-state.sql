-- reliable-mail schema version 3: recipient-state
begin;
alter table reliable_mail.mail_outbox add column "accepted_recipients" jsonb null;
alter table reliable_mail.mail_outbox_attempt add column "recipients" jsonb null;
alter table reliable_mail.mail_outbox_attempt add column "provider_message_id" text null;
alter table reliable_mail.mail_outbox_attempt drop constraint "mail_outbox_attempt_outcome_check";
alter table reliable_mail.mail_outbox_attempt add constraint "mail_outbox_attempt_outcome_check" check ("outcome" in ('started', 'sent', 'partial', 'transient', 'permanent', 'outage', 'sender', 'unknown'));
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 3, 'recipient-state', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
