import type { SchemaVersion } from './schema-version.js';

/** How many buckets the day's window is cut into: a quarter of an hour each over 24 hours. */
export const DAY_BUCKETS = 96;

/**
 * A provider's limits shared by every instance on the database, one row per quota key (a lane, or the lanes that
 * share one provider account): its rate, its rolling day's quota, and a pause any instance sets when the provider
 * asks to wait (a Retry-After). Only reliable-mail's statements of outbox/sql/*-send-quota.ts write it, a take in
 * one upsert that locks the row, so that two instances never both take the last send.
 *
 * The rate is kept twice: a token bucket (`tokens`, `refilled_at`) spreads the sends over the second, and the
 * takes of the last second (`recent_at`, in ms since the epoch, and `recent_counts`, what each granted) make sure no
 * second holds more than the limit whatever the bucket allowed. The day is rolling, as SES counts its 24-hour quota
 * ("calculated on a rolling time period": a send counts for 24 hours from when it went, nothing resets at midnight).
 * `day_counts` holds the sends of the last DAY_BUCKETS + 1 quarter-hours, the newest (`day_bucket`, counted from the
 * epoch) last: one more than the day, so that the quarter-hour the day starts in is counted whole, and a send leaves
 * at most 15 minutes after the provider lets it go, never before. `last_granted` is what the latest take granted,
 * for its RETURNING, which sees only the row as written.
 */
export const sendQuotas: SchemaVersion = {
  version: 10,
  name: 'send-quotas',
  servesCodeFrom: 1,
  statements: (t) => [
    `create table ${t.sendQuota} (
        "key" text primary key,
        "tokens" double precision not null,
        "refilled_at" timestamptz not null,
        "recent_at" double precision[] not null default '{}',
        "recent_counts" int[] not null default '{}',
        "day_bucket" bigint not null default 0,
        "day_counts" int[] not null default '{}',
        "paused_until" timestamptz null,
        "last_granted" int not null default 0
      )`,
  ],
};
