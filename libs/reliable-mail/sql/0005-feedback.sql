-- reliable-mail schema version 5: feedback
begin;
create index "mail_outbox_provider_message_id_index" on reliable_mail.mail_outbox ("provider_message_id") where "provider_message_id" is not null;
create index "mail_outbox_sent_index" on reliable_mail.mail_outbox ("sent_at") where "status" = 'sent';
create table reliable_mail.mail_outbox_feedback (
        "id" uuid primary key,
        "outbox_id" uuid null,
        "source" text not null,
        "recipient" text not null,
        "kind" text not null,
        "bounce_type" text null,
        "provider_event_id" text not null,
        "provider_message_id" text null,
        "status" text null,
        "diagnostic" text null,
        "reported_at" timestamptz not null,
        "received_at" timestamptz not null default now(),
        "payload" jsonb not null,
        constraint "mail_outbox_feedback_outbox_id_foreign" foreign key ("outbox_id") references reliable_mail.mail_outbox ("id") on delete cascade,
        constraint "mail_outbox_feedback_event_unique" unique ("source", "provider_event_id", "recipient"),
        constraint "mail_outbox_feedback_kind_check" check ("kind" in ('delivered', 'bounced', 'complained', 'delayed')),
        constraint "mail_outbox_feedback_bounce_type_check" check (("kind" = 'bounced') = ("bounce_type" is not null) and "bounce_type" in ('hard', 'soft'))
      );
create index "mail_outbox_feedback_outbox_id_index" on reliable_mail.mail_outbox_feedback ("outbox_id");
create index "mail_outbox_feedback_problem_index" on reliable_mail.mail_outbox_feedback ("received_at") where "kind" in ('bounced', 'complained');
create index "mail_outbox_feedback_unlinked_index" on reliable_mail.mail_outbox_feedback ("received_at") where "outbox_id" is null;
alter table reliable_mail.mail_suppression drop constraint "mail_suppression_source_check";
alter table reliable_mail.mail_suppression add constraint "mail_suppression_source_check" check ("source" in ('bounce', 'complaint', 'operator'));
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 5, 'feedback', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
