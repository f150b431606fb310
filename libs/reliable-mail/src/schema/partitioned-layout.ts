import { sqlStateOf } from '../database/statement-refusal.js';
import { DDL_LOCK_TIMEOUT, LOCK_NOT_AVAILABLE, LOCK_TRIES, type MigrationConnection } from './migrate-schema.js';
import type { OutboxTables } from './outbox-tables.js';
import { literal, type SchemaSession } from './schema-session.js';
import { PARTITION_DAY_DEFAULT, partitionDays } from './versions/0013-partition-days.js';

// The partitioned layout (opt-in, issue 24): the outbox, its attempts and its feedback partitioned by day on
// `partition_day`. Why each part is as it is: see versions/0013-partition-days.ts. Every statement reliable-mail runs
// is the same in both layouts; what differs is DDL, here: the conversion of an installation, the partitions made
// ahead, and the drop of a day's partitions by retention.

const DEADLOCK_DETECTED = '40P01';

/** The days after today whose partitions are made ahead, unless `retention.partitionsAhead` (or --ahead) says. */
export const DEFAULT_PARTITIONS_AHEAD = 3;

/**
 * The fewest days ahead `retention.partitionsAhead` and --ahead take: health fails with fewer than 2 days' partitions
 * after today (one day's margin for a retention run that fails), so 1 would keep it failing.
 */
export const MIN_PARTITIONS_AHEAD = 2;

/** The tables partitioned alike: a day's partition of each holds the rows of that day, their attempts and feedback. */
const partitionedTables = (t: OutboxTables): string[] => [t.outbox, t.attempt, t.feedback];

/** The oldest code a partitioned outbox serves: the version that added `partition_day`. */
const PARTITIONED_LAYOUT_SERVES_CODE_FROM = partitionDays.version;

/** The idempotency keys of a partitioned outbox: unpartitioned, so that a key is unique across every day. */
export const idempotencyKeyTable = (t: OutboxTables): string => `${t.schema}.mail_idempotency_key`;

/** A day as PostgreSQL writes a date: 2026-12-03. */
export type Day = string;

export const addDays = (day: Day, days: number): Day =>
  new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);

const partitionOf = (table: string, day: Day): string => `${table}_p${day.replaceAll('-', '')}`;
const legacyOf = (table: string): string => `${table}_legacy`;
const bareName = (table: string): string => table.slice(table.indexOf('.') + 1);

/** A partition of the outbox: the days from `from` (null: every day before `to`) up to `to`, excluded. */
export interface DayPartition {
  readonly name: string;
  readonly from: Day | null;
  readonly to: Day;
}

export async function isPartitioned(session: SchemaSession, t: OutboxTables): Promise<boolean> {
  const [row] = await session.run<{ partitioned: boolean }>(
    `select coalesce((select relkind = 'p' from pg_class where oid = to_regclass(${literal(t.outbox)})), false)
       as partitioned`,
  );
  return row.partitioned;
}

/** Today in UTC, as the database's clock has it: the day new rows are kept in. */
export async function today(session: SchemaSession): Promise<Day> {
  const [row] = await session.run<{ day: Day }>(`select to_char(${PARTITION_DAY_DEFAULT}, 'YYYY-MM-DD') as day`);
  return row.day;
}

/** The outbox's partitions, oldest first, read from the catalog. */
export async function outboxPartitions(session: SchemaSession, t: OutboxTables): Promise<DayPartition[]> {
  const rows = await session.run<{ name: string; bound: string }>(
    `select n.nspname || '.' || c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
     from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_namespace n on n.oid = c.relnamespace
     where i.inhparent = to_regclass(${literal(t.outbox)})`,
  );
  return rows.map(({ name, bound }) => dayPartitionOf(name, bound)).sort((a, b) => a.to.localeCompare(b.to));
}

/**
 * A partition from its bound as the catalog writes it: FOR VALUES FROM ('2026-12-03') TO ('2026-12-04'), or FROM
 * (MINVALUE) for the converted installation's rows. Throws on any other, which this code never makes.
 */
export function dayPartitionOf(name: string, bound: string): DayPartition {
  const match = /^FOR VALUES FROM \((?:'(\d{4}-\d\d-\d\d)'|MINVALUE)\) TO \('(\d{4}-\d\d-\d\d)'\)$/.exec(bound);
  if (!match) throw new Error(`reliable-mail: partition ${name} has a bound this code does not make: ${bound}`);
  return { name, from: match[1] ?? null, to: match[2] };
}

/**
 * Makes the day partitions of the outbox, its attempts and feedback up to `ahead` days after today, each in a
 * transaction of its own; returns the days made. A partition is made as a table and attached, which locks the parent
 * against other DDL only (SHARE UPDATE EXCLUSIVE): `create table … partition of` would take ACCESS EXCLUSIVE, and
 * enqueues and claims would queue behind any long transaction that holds the outbox. Safe to run anywhere at once
 * (instances, the CLI): a day already there is skipped.
 */
export async function createPartitionsAhead(
  connection: MigrationConnection,
  t: OutboxTables,
  ahead: number,
): Promise<Day[]> {
  const made: Day[] = [];
  const last = addDays(await today(connection), ahead);
  for (;;) {
    const madeDay = await connection.transaction(async (session) => {
      await session.run(`select pg_advisory_xact_lock(hashtext(${literal(`reliable-mail partitions ${t.schema}`)}))`);
      await session.run(DDL_LOCK_TIMEOUT);
      const partitions = await outboxPartitions(session, t);
      const day = partitions.at(-1)?.to ?? (await today(session));
      if (day > last) return null;
      for (const table of partitionedTables(t)) {
        const partition = partitionOf(table, day);
        await session.run(`create table ${partition} (like ${table} including all)`);
        await session.run(
          `alter table ${table} attach partition ${partition} for values from (${literal(day)}) to (${literal(addDays(day, 1))})`,
        );
      }
      return day;
    });
    if (madeDay === null) return made;
    made.push(madeDay);
  }
}

/**
 * What prepares the conversion without stopping enqueues for long: the unique indexes a partitioned table needs,
 * with the day, built concurrently (`indexes`, each on its own, outside a transaction); then, for each table, the
 * check that proves its rows are all before `legacyUntil`, added NOT VALID (`checks`: an ACCESS EXCLUSIVE lock held
 * for milliseconds, but waited for behind any long transaction on the table, and writes queue behind the wait: so
 * each in a transaction of its own, under a lock timeout, tried again, as the switch), and validated under a lock that
 * lets writes through (`validations`). On a large outbox they take a while; run again, they find the indexes done.
 */
export function conversionPreparation(
  t: OutboxTables,
  legacyUntil: Day,
): { indexes: string[]; checks: string[][]; validations: string[] } {
  return {
    indexes: [
      `create unique index concurrently if not exists "mail_outbox_id_day" on ${t.outbox} ("id", "partition_day")`,
      `create index concurrently if not exists "mail_outbox_idempotency_key_index" on ${t.outbox} ("idempotency_key") where "idempotency_key" is not null`,
      `create unique index concurrently if not exists "mail_outbox_attempt_id_day" on ${t.attempt} ("id", "partition_day")`,
      `create unique index concurrently if not exists "mail_outbox_feedback_id_day" on ${t.feedback} ("id", "partition_day")`,
      `create unique index concurrently if not exists "mail_outbox_feedback_event_day" on ${t.feedback} ("source", "provider_event_id", "recipient", "partition_day")`,
    ],
    // Made again on a new run (whose legacyUntil may be later): the check of a failed run is dropped with its failure.
    checks: partitionedTables(t).map((table) => [
      `alter table ${table} drop constraint if exists ${conversionCheckOf(table)}`,
      `alter table ${table} add constraint ${conversionCheckOf(table)} check ("partition_day" < ${literal(legacyUntil)}) not valid`,
    ]),
    validations: partitionedTables(t).map(
      (table) => `alter table ${table} validate constraint ${conversionCheckOf(table)}`,
    ),
  };
}

/**
 * The switch, in one transaction: each table becomes the first partition (every day before `legacyUntil`) of a
 * partitioned table of its name, with nothing copied; the indexes it has become its partitions of the parent's
 * (attached, not built), but for the ones a partitioned table cannot have (unique without the day), which stay on it
 * alone; the foreign keys to the outbox go, the idempotency keys move to their own table and its trigger. Holds the
 * outbox's lock from the first rename to the commit: the keys' copy (an index scan of the keyed rows) is the long part.
 */
export function conversionSwitch(t: OutboxTables, legacyUntil: Day, serverVersion: number): string[] {
  const keys = idempotencyKeyTable(t);
  const parentIndexes = (table: string) => {
    const legacy = legacyOf(table);
    // The parent gets each index of the old table that it can have, under the same name, which the attach then
    // matches with the old table's own (renamed): not a unique one without the day (the old primary key, the keys'
    // and the feedback repeats' indexes), which the old table keeps alone. (id, day) is a unique index, not a primary
    // key: no foreign key refers to it, and an attach matches a primary key only with a constraint.
    return `do $$
      declare index record;
      begin
        for index in
          select i.indexrelid::regclass::text as qualified, c.relname as name, pg_get_indexdef(i.indexrelid) as definition,
                 i.indisunique as is_unique
          from pg_index i join pg_class c on c.oid = i.indexrelid
          where i.indrelid = ${literal(legacy)}::regclass
        loop
          execute format('alter index %s rename to %I', index.qualified, index.name || '_legacy');
          if not index.is_unique or index.definition like '%partition_day%' then
            execute replace(index.definition, ' ON ${legacy} ', ' ON ${table} ');
          end if;
        end loop;
      end $$`;
  };
  const steps = partitionedTables(t).flatMap((table) => [
    `alter table ${table} rename to ${bareName(legacyOf(table))}`,
    `create table ${table} (like ${legacyOf(table)} including defaults including constraints including storage${
      serverVersion >= 140000 ? ' including compression' : ''
    }) partition by range ("partition_day")`,
    `alter table ${table} drop constraint ${conversionCheckOf(table)}`,
    parentIndexes(table),
  ]);
  const foreignKeys = [
    `alter table ${t.attempt} drop constraint "mail_outbox_attempt_outbox_id_foreign"`,
    `alter table ${t.feedback} drop constraint "mail_outbox_feedback_outbox_id_foreign"`,
    `alter table ${t.event} drop constraint "mail_outbox_event_outbox_id_foreign"`,
  ];
  const attach = partitionedTables(t).flatMap((table) => [
    `alter table ${table} attach partition ${legacyOf(table)} for values from (minvalue) to (${literal(legacyUntil)})`,
    `alter table ${legacyOf(table)} drop constraint ${conversionCheckOf(table)}`,
  ]);
  return [
    // Every lock at once, the outbox's first, in the order a claim and dropPartition take them: taken one by one as
    // the statements come, a claim holding one table while it waits for another could deadlock with the switch.
    `lock table ${t.outbox}, ${t.attempt}, ${t.feedback}, ${t.event} in access exclusive mode`,
    ...foreignKeys,
    ...steps,
    ...attach,
    `create table ${keys} (
       "idempotency_key" text primary key,
       "outbox_id" uuid not null,
       "partition_day" date not null
     )`,
    // Retention deletes the keys of the day it drops.
    `create index "mail_idempotency_key_day_index" on ${keys} ("partition_day")`,
    `insert into ${keys} ("idempotency_key", "outbox_id", "partition_day")
     select "idempotency_key", "id", "partition_day" from ${t.outbox} where "idempotency_key" is not null`,
    ...idempotencyTrigger(t),
    // Code older than version 13 fails on this layout (its enqueue's `on conflict ("idempotency_key") where …` finds
    // no unique index of the keys: 42P10): the newest version's row now serves code from 13 only, which the start
    // check of older code reads (serves_code_from above the versions it knows) and refuses to start on.
    `update ${t.migrations} set "serves_code_from" = greatest("serves_code_from", ${PARTITIONED_LAYOUT_SERVES_CODE_FROM})
     where "version" = (select max("version") from ${t.migrations})`,
  ];
}

/**
 * The key's trigger: a row whose key another row holds is skipped (the enqueue's ON CONFLICT DO NOTHING, across
 * every partition: the keys' table waits for a concurrent insert of the same key to commit or roll back, as a unique
 * index does). A row moved to another day's partition comes through here again, and keeps its key, with its day. A
 * key whose row is gone (purged, dropped with its day before retention deleted the day's keys, or left by a crash in
 * between) is taken over, as the plain layout's unique index lets a purged row's key be enqueued again: the key's
 * lock is taken first, then its row is looked for by a statement that starts after it, so a holder committed
 * meanwhile is seen; a holder moved meanwhile has updated the key's day under the same lock.
 */
function idempotencyTrigger(t: OutboxTables): string[] {
  const keys = idempotencyKeyTable(t);
  return [
    `create or replace function ${t.schema}.mail_outbox_take_idempotency_key() returns trigger language plpgsql as $$
     declare holder record;
     begin
       if new."idempotency_key" is null then
         return new;
       end if;
       loop
         insert into ${keys} ("idempotency_key", "outbox_id", "partition_day")
         values (new."idempotency_key", new."id", new."partition_day")
         on conflict ("idempotency_key") do update set "partition_day" = excluded."partition_day"
           where ${keys}."outbox_id" = excluded."outbox_id";
         if found then
           return new;
         end if;
         select "outbox_id", "partition_day" into holder from ${keys}
           where "idempotency_key" = new."idempotency_key" for update;
         -- Not found: deleted by retention since the insert met it; the insert is tried again.
         if found then
           if exists (select 1 from ${t.outbox} where "id" = holder."outbox_id"
                        and "partition_day" = holder."partition_day") then
             return null;
           end if;
           update ${keys} set "outbox_id" = new."id", "partition_day" = new."partition_day"
             where "idempotency_key" = new."idempotency_key";
           return new;
         end if;
       end loop;
     end $$`,
    `create trigger "mail_outbox_idempotency_key" before insert on ${t.outbox}
       for each row execute function ${t.schema}.mail_outbox_take_idempotency_key()`,
  ];
}

/**
 * Converts a plain outbox (schema version 13 or later) to the partitioned layout, with enqueues and sends going on:
 * the preparation (see conversionPreparation), then the switch, then the partitions from `legacyUntil` on. Every row
 * stays where it is, in the first partition; rows enqueued meanwhile too (two days ahead of today: a conversion
 * that crosses midnight still fits). An outbox already partitioned is left as it is (`converted` false).
 */
export async function convertToPartitions(
  connection: MigrationConnection,
  t: OutboxTables,
  ahead: number,
): Promise<{ converted: boolean; legacyUntil: Day }> {
  if (await isPartitioned(connection, t)) {
    return { converted: false, legacyUntil: (await outboxPartitions(connection, t))[0].to };
  }
  const legacyUntil = addDays(await today(connection), 2);
  const [{ server_version_num: serverVersion }] = await connection.run<{ server_version_num: number }>(
    `select current_setting('server_version_num')::int as server_version_num`,
  );
  const { indexes, checks, validations } = conversionPreparation(t, legacyUntil);
  for (const statement of indexes) await connection.run(statement);
  // The tables given their check, to take it from if the conversion fails: not the others, whose lock may be the
  // one it failed to get.
  const checked: string[] = [];
  try {
    for (const [index, table] of partitionedTables(t).entries()) {
      await underLockTimeout(connection, checks[index]);
      checked.push(table);
    }
    for (const statement of validations) await connection.run(statement);
    await underLockTimeout(connection, [
      `set local statement_timeout = 0`,
      ...conversionSwitch(t, legacyUntil, serverVersion),
    ]);
  } catch (error) {
    // The checks would refuse every row enqueued from legacyUntil on: an outbox left plain must not keep them.
    for (const table of checked) {
      await underLockTimeout(connection, [
        `alter table ${table} drop constraint if exists ${conversionCheckOf(table)}`,
      ]);
    }
    throw error;
  }
  await createPartitionsAhead(connection, t, ahead);
  return { converted: true, legacyUntil };
}

/**
 * Runs statements that take a table's ACCESS EXCLUSIVE lock in one transaction, waiting 5 s at most for the locks
 * (behind a long transaction, enqueues and claims queue behind the wait: 5 s, not as long as that transaction), and
 * tries again, LOCK_TRIES times in all, as a version's DDL does,, on a timeout or a deadlock, before it fails.
 */
async function underLockTimeout(connection: MigrationConnection, statements: string[]): Promise<void> {
  for (let lockTries = 1; ; lockTries++) {
    try {
      await connection.transaction(async (session) => {
        await session.run(DDL_LOCK_TIMEOUT);
        for (const statement of statements) await session.run(statement);
      });
      return;
    } catch (error) {
      const lockRefused = [LOCK_NOT_AVAILABLE, DEADLOCK_DETECTED].includes(sqlStateOf(error) ?? '');
      if (!lockRefused || lockTries >= LOCK_TRIES) throw error;
    }
  }
}

const conversionCheckOf = (table: string): string => `${bareName(table)}_before_partitions`;

/**
 * Detaches and drops the partitions of one day range, in one transaction, once nothing retention keeps is left in
 * the outbox's: returns false, dropping nothing, when something is (a row being sent, one that changed since it was
 * moved forward), for the next run to try again. The detach locks the three tables whole (ACCESS EXCLUSIVE, as long
 * as the check and three drops take: milliseconds, whatever the day's size), taken at once in the order the
 * statements take them (the outbox first): taken one by one, a claim holding the attempts' lock while it waits for
 * the outbox's would wait for the detach, and the detach for it. The wait is bounded; a timeout, too, leaves the
 * range to the next run. The range's idempotency keys are left: see deleteDroppedKeys.
 */
export async function dropPartition(
  connection: MigrationConnection,
  t: OutboxTables,
  partition: DayPartition,
  keepClosedForMs: number,
): Promise<boolean> {
  return connection
    .transaction(async (session) => {
      await session.run(`set local lock_timeout = '2s'`);
      await session.run(`lock table ${partitionedTables(t).join(', ')} in access exclusive mode`);
      await session.run(`alter table ${t.outbox} detach partition ${partition.name}`);
      // The partition's open and problem rows, and its recent closed ones, each from its partial index: a whole scan
      // of a day's million rows here would hold every table's lock as long.
      await session.run(`set local enable_seqscan = off`);
      const [kept] = await session.run<{ kept: boolean }>(keptRowsCheck(partition.name, keepClosedForMs));
      if (kept.kept) throw new PartitionStillHolds();
      const suffix = partition.name.slice(t.outbox.length);
      for (const table of [t.attempt, t.feedback]) {
        await session.run(`alter table ${table} detach partition ${table}${suffix}`);
        await session.run(`drop table ${table}${suffix}`);
      }
      await session.run(`drop table ${partition.name}`);
      return true;
    })
    .catch((error: unknown) => {
      if (error instanceof PartitionStillHolds || sqlStateOf(error) === LOCK_NOT_AVAILABLE) return false;
      throw error;
    });
}

/**
 * Deletes the idempotency keys of a dropped day range, `batchSize` at a time, each batch a transaction of its own;
 * returns how many. Not in the drop's transaction: a million keys took about a second to delete in psql, the converted
 * installation's first partition's keys more (past a statement timeout), and the drop's lock would hold every
 * enqueue and claim as long. A key left behind (a run stopped between the drop and here) refuses nothing: the
 * trigger takes over a key whose row is gone. A key taken over meanwhile has today's day, and stays.
 */
export async function deleteDroppedKeys(
  connection: MigrationConnection,
  t: OutboxTables,
  partition: DayPartition,
  batchSize: number,
): Promise<number> {
  const keys = idempotencyKeyTable(t);
  const from = partition.from === null ? '' : `"partition_day" >= ${literal(partition.from)} and `;
  let deleted = 0;
  for (;;) {
    const rows = await connection.run(
      `delete from ${keys} where "idempotency_key" in (
         select "idempotency_key" from ${keys} where ${from}"partition_day" < ${literal(partition.to)}
         limit ${Number(batchSize)}
       ) returning 1`,
    );
    deleted += rows.length;
    if (rows.length < batchSize) return deleted;
  }
}

class PartitionStillHolds extends Error {}

/**
 * The rows retention keeps, whatever their day: pending (future-dated included), failed or dead (they wait for an
 * operator), or closed less than $1 ms ago. A `sending` row is kept too, but never moved (see move-forward.ts). Each
 * arm is the predicate of a partial index (due, problem, closed: see OUTBOX_SCHEMA_V1), so that the planner can read
 * a day's kept rows from those indexes (a BitmapOr) whatever the number of its sent rows.
 */
export const KEPT_ROWS = `("status" = 'pending' or "status" in ('failed', 'dead')
  or ("status" in ('sent', 'cancelled', 'expired', 'suppressed') and "updated_at" >= now() - $1::float8 * interval '1 millisecond'))`;

/** KEPT_ROWS for a retention of `keepClosedForMs`, a number written into the statement. */
const keptRowsFor = (keepClosedForMs: number): string => KEPT_ROWS.replaceAll('$1', String(Number(keepClosedForMs)));

/** How many rows retention keeps, or being sent, a partition holds: what a drop that did not happen waits for. */
export async function heldRows(
  connection: MigrationConnection,
  partition: DayPartition,
  keepClosedForMs: number,
): Promise<number> {
  return connection.transaction(async (session) => {
    // From the partial indexes, as the drop's check: not a scan of the day's sent rows.
    await session.run(`set local enable_seqscan = off`);
    const [row] = await session.run<{ rows: number }>(
      `select count(*)::int as rows from ${partition.name}
       where ${keptRowsFor(keepClosedForMs)} or "status" = 'sending'`,
    );
    return row.rows;
  });
}

/** Whether a partition still holds a row retention keeps, or one being sent: the check before its drop. */
export const keptRowsCheck = (partition: string, keepClosedForMs: number): string =>
  `select exists (select 1 from ${partition} where ${keptRowsFor(keepClosedForMs)})
          or exists (select 1 from ${partition} where "status" = 'sending') as kept`;
