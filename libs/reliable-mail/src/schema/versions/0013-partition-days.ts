import type { SchemaVersion } from './schema-version.js';

/**
 * The day each row is kept in, on the outbox, its attempts and its feedback: what a time-partitioned outbox is
 * partitioned by (issue 24).
 *
 * The design, for both layouts (the plain one stays the default; the partitioned one is opt-in, see
 * partitioned-layout.ts):
 *
 * - **The partition key is `partition_day`, not the id.** The id is public (the Message-ID is `<id@domain>`, admin
 *   and console look rows up by it) and can never change; the key is a UTC date, set at insert from now() (its
 *   default), and moved forward by an UPDATE for a row retention keeps, with the row's attempts and feedback in the
 *   same statement. A date, not the creation time: "the partition the row is in", which a row kept past its day
 *   leaves. In the plain layout it is one more 4-byte column that nothing reads; it is added here for both so that
 *   every statement is the same in both layouts and an installation converts without a deploy in between.
 * - **The unique index is (id, partition_day)** in the partitioned layout, not a primary key: PostgreSQL enforces no
 *   unique index that lacks the partition key. The id stays unique by construction: a UUID v7 made by the library (48
 *   bits of ms and 74 random bits), never given by a caller. A lookup by id alone probes each partition's index: one
 *   index descent per partition (see docs/database.md "Partitions").
 * - **The idempotency key's uniqueness** is held by a table of its own, unpartitioned (`mail_idempotency_key`: key
 *   → row id, day), written by a BEFORE INSERT trigger on the outbox: a key already taken by another row makes the
 *   trigger skip the row, as the unique index's ON CONFLICT DO NOTHING did, so the enqueue stays one statement and
 *   the same statement in both layouts (`on conflict do nothing`, with no target: in the plain layout the unique
 *   index is still its arbiter). A row moved to another partition is deleted and inserted again by PostgreSQL, which
 *   fires the trigger again: it then finds its own key and keeps it (an experiment without that check lost the row).
 *   A key whose row is gone (purged, dropped with its day) is taken over by the next row that brings it.
 * - **The foreign keys** from the attempts, feedback and events to the outbox cannot name the id alone. Attempts and
 *   feedback carry their row's `partition_day` (the claim and the feedback statement write it from the row), are
 *   partitioned alike, moved with their row, and dropped with its partition; no foreign key, since its check when a
 *   referenced partition is detached joins the whole referencing table. Events are deleted once emitted (seconds):
 *   not partitioned, their foreign key dropped. A purge deletes a row's attempts and feedback itself.
 * - **The claim** reads the due and lease partial indexes of every partition, merged (Merge Append) under its
 *   `order by … limit`; due rows gather in the newest partitions anyway, since retention moves the pending ones
 *   forward. test/partitions plans it with 30 partitions.
 * - **Retention** moves forward every row of a partition past `keepClosedForMs` that it would not delete (pending,
 *   failed, dead, or closed more recently), skipping rows another session holds, never a `sending` row (its settle
 *   and lease renewals must find it where the claim left it: the partition waits for the settle), then detaches and
 *   drops the partitions of that day under a short lock, after checking in the same transaction that nothing kept is
 *   left in them; the day's idempotency keys are deleted after, in batches, outside that lock.
 */
export const partitionDays: SchemaVersion = {
  version: 13,
  name: 'partition-days',
  servesCodeFrom: 1,
  // now() is stable, so each default is evaluated once for the rows there (PostgreSQL 11's fast default, no
  // rewrite), and in one transaction: a row and its attempts and feedback get the same day.
  statements: (t) =>
    [t.outbox, t.attempt, t.feedback].map(
      (table) => `alter table ${table} add column "partition_day" date not null default ${PARTITION_DAY_DEFAULT}`,
    ),
};

/** Today in UTC: the day a new row is kept in, whatever the session's time zone. */
export const PARTITION_DAY_DEFAULT = `((now() at time zone 'utc')::date)`;
