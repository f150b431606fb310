-- reliable-mail schema version 1: create-outbox
begin;
do $$
  begin
    if not exists (select 1 from pg_namespace where nspname = 'reliable_mail') then
      create schema reliable_mail;
    end if;
  end $$;
create table if not exists reliable_mail.mail_migrations (
    "version" int primary key,
    "name" text not null,
    "serves_code_from" int not null,
    "applied_at" timestamptz not null default now()
  );
create table reliable_mail.mail_outbox (
        "id" uuid primary key,
        "idempotency_key" text null,
        "content_hash" text not null,
        "message_id" text not null,
        "status" text not null default 'pending',
        "lane" text not null default 'default',
        "payload" jsonb not null,
        "metadata" jsonb null,
        "attempts" int not null default 0,
        "max_attempts" int not null,
        "next_attempt_at" timestamptz not null default now(),
        "expires_at" timestamptz null,
        "cancel_requested_at" timestamptz null,
        "locked_until" timestamptz null,
        "lock_token" uuid null,
        "locked_by" text null,
        "last_error" text null,
        "last_reply_code" int null,
        "last_enhanced_status" text null,
        "provider_reply" text null,
        "provider_message_id" text null,
        "requeued_at" timestamptz null,
        "requeue_reason" text null,
        "rejected_recipients" jsonb null,
        "created_at" timestamptz not null default now(),
        "sent_at" timestamptz null,
        "updated_at" timestamptz not null default now(),
        constraint "mail_outbox_message_id_unique" unique ("message_id"),
        constraint "mail_outbox_status_check" check ("status" in ('pending', 'sending', 'sent', 'failed', 'dead', 'cancelled', 'expired', 'suppressed'))
      );
create unique index "mail_outbox_idempotency_key_unique" on reliable_mail.mail_outbox ("idempotency_key") where "idempotency_key" is not null;
create index "mail_outbox_due_index" on reliable_mail.mail_outbox ("lane", "next_attempt_at") where "status" = 'pending';
create index "mail_outbox_lease_index" on reliable_mail.mail_outbox ("lane", "locked_until") where "status" = 'sending';
create index "mail_outbox_closed_index" on reliable_mail.mail_outbox ("updated_at") where "status" in ('sent', 'cancelled', 'expired', 'suppressed');
create index "mail_outbox_problem_index" on reliable_mail.mail_outbox ("updated_at") where "status" in ('failed', 'dead');
create table reliable_mail.mail_outbox_attempt (
        "id" uuid primary key,
        "outbox_id" uuid not null,
        "attempt" int not null,
        "worker_id" text not null,
        "lock_token" uuid not null,
        "started_at" timestamptz not null default now(),
        "finished_at" timestamptz null,
        "outcome" text not null default 'started',
        "reply_code" int null,
        "enhanced_status" text null,
        "reply" text null,
        "duration_ms" int null,
        constraint "mail_outbox_attempt_outbox_id_foreign" foreign key ("outbox_id") references reliable_mail.mail_outbox ("id") on delete cascade,
        constraint "mail_outbox_attempt_outcome_check" check ("outcome" in ('started', 'sent', 'transient', 'permanent', 'sender', 'unknown'))
      );
create index "mail_outbox_attempt_outbox_id_index" on reliable_mail.mail_outbox_attempt ("outbox_id", "attempt");
create table reliable_mail.mail_outbox_event (
        "id" bigserial primary key,
        "outbox_id" uuid not null,
        "name" text not null,
        "payload" jsonb not null,
        "locked_until" timestamptz not null,
        "created_at" timestamptz not null default now(),
        constraint "mail_outbox_event_outbox_id_foreign" foreign key ("outbox_id") references reliable_mail.mail_outbox ("id") on delete cascade
      );
create index "mail_outbox_event_locked_until_index" on reliable_mail.mail_outbox_event ("locked_until");
create table reliable_mail.mail_suppression (
        "address" text primary key,
        "reason" text not null,
        "source" text not null,
        "outbox_id" uuid null,
        "created_at" timestamptz not null default now(),
        constraint "mail_suppression_source_check" check ("source" in ('bounce', 'operator'))
      );
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 1, 'create-outbox', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
