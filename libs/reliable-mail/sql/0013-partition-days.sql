-- reliable-mail schema version 13: partition-days
begin;
alter table reliable_mail.mail_outbox add column "partition_day" date not null default ((now() at time zone 'utc')::date);
alter table reliable_mail.mail_outbox_attempt add column "partition_day" date not null default ((now() at time zone 'utc')::date);
alter table reliable_mail.mail_outbox_feedback add column "partition_day" date not null default ((now() at time zone 'utc')::date);
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 13, 'partition-days', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
