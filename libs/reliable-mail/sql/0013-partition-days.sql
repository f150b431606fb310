-- reliable-mail schema version 13: partition-days
begin;
alter table reliable_mail.mail_outbox add column "partition_day" date not null default ((now() at time zone 'utc')::date);
alter table reliable_mail.mail_outbox_attempt add column "partition_day" date not null default ((now() at time zone 'utc')::date);
alter table reliable_mail.mail_outbox_feedback add column "partition_day" date not null default ((now() at time zone 'utc')::date);
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   values (13, 'partition-days', 1);
commit;
