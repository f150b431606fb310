-- reliable-mail schema version 8: console
begin;
alter table reliable_mail.mail_outbox add column "traceparent" text null;
alter table reliable_mail.mail_outbox add column "tracestate" text null;
alter table reliable_mail.mail_outbox add column "recipients" text[] null;
update reliable_mail.mail_outbox set "recipients" = array(
         select lower(r->>'address') from jsonb_array_elements(
           coalesce("payload"->'to', '[]') || coalesce("payload"->'cc', '[]') || coalesce("payload"->'bcc', '[]')) r)
       where "recipients" is null;
create index if not exists "mail_outbox_metadata_index" on reliable_mail.mail_outbox using gin ("metadata" jsonb_path_ops) where "metadata" is not null and "status" not in ('pending', 'sending');
create index if not exists "mail_outbox_recipients_index" on reliable_mail.mail_outbox using gin ("recipients") where "status" not in ('pending', 'sending');
create index if not exists "mail_outbox_unsent_final_index" on reliable_mail.mail_outbox ("status", "lane") where "status" in ('failed', 'dead', 'cancelled', 'expired', 'suppressed');
create table reliable_mail.mail_console_audit (
        "id" uuid primary key,
        "actor" text not null,
        "action" text not null,
        "reason" text null,
        "filter" jsonb null,
        "outbox_ids" uuid[] not null,
        "created_at" timestamptz not null default now()
      );
create index "mail_console_audit_outbox_ids_index" on reliable_mail.mail_console_audit using gin ("outbox_ids");
create table reliable_mail.mail_instance (
        "id" text primary key,
        "host" text not null,
        "pid" int not null,
        "started_at" timestamptz not null,
        "heartbeat_at" timestamptz not null,
        "heartbeat_ms" int not null,
        "lanes" jsonb not null
      );
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 8, 'console', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
