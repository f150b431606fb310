-- reliable-mail schema version 10: send-quotas
begin;
create table reliable_mail.mail_send_quota (
        "key" text primary key,
        "tokens" double precision not null,
        "refilled_at" timestamptz not null,
        "recent_at" double precision[] not null default '{}',
        "recent_counts" int[] not null default '{}',
        "day_bucket" bigint not null default 0,
        "day_counts" int[] not null default '{}',
        "paused_until" timestamptz null,
        "last_granted" int not null default 0
      );
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 10, 'send-quotas', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
