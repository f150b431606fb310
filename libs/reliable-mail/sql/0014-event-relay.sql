-- reliable-mail schema version 14: event-relay
begin;
create table reliable_mail.mail_relay_destination (
        "name" text primary key,
        "events" text[] not null,
        "registered_at" timestamptz not null default now(),
        "seen_at" timestamptz not null default now()
      );
create table reliable_mail.mail_relay (
        "id" bigserial primary key,
        "destination" text not null,
        "event_id" bigint not null,
        "outbox_id" uuid not null,
        "name" text not null,
        "payload" jsonb not null,
        "recorded_at" timestamptz not null default now(),
        "locked_until" timestamptz not null default now(),
        "attempts" int not null default 0,
        "last_error" text null
      );
create index "mail_relay_due_index" on reliable_mail.mail_relay ("destination", "locked_until");
create index "mail_relay_destination_index" on reliable_mail.mail_relay ("destination", "id");
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 14, 'event-relay', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
