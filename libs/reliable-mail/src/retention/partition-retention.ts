import type { SqlClient } from '../database/sql-client.js';
import { moveForward } from '../outbox/sql/move-forward.js';
import type { MigrationConnection } from '../schema/migrate-schema.js';
import type { OutboxTables } from '../schema/outbox-tables.js';
import {
  createPartitionsAhead,
  type Day,
  deleteDroppedKeys,
  dropPartition,
  heldRows,
  outboxPartitions,
} from '../schema/partitioned-layout.js';

export interface PartitionRetentionOptions {
  readonly keepClosedForMs: number;
  readonly batchSize: number;
  readonly partitionsAhead: number;
}

export interface PartitionRetentionResult {
  /** The days whose partitions were made ahead. */
  readonly made: Day[];
  /** The outbox's partitions dropped, with their attempts' and feedback's. */
  readonly dropped: string[];
  /** The partitions past retention left for the next run, with the rows that hold them (being sent, or kept). */
  readonly held: { readonly partition: string; readonly rows: number }[];
}

/**
 * Retention of a partitioned outbox: makes the partitions of the days ahead, then, oldest first, for each day range
 * wholly past retention, moves the rows it keeps forward in batches (statements on `db`, reliable-mail's pool) and
 * drops the range's partitions (DDL on `connection`, one of its own), then deletes the range's idempotency keys. A
 * range whose drop finds a row still kept (one being sent) is left for the next run; the ranges after it are
 * dropped all the same: a row stuck in `sending` (an instance gone, its lease not yet released) must not hold every
 * younger day.
 */
export async function retainPartitions(
  connection: MigrationConnection,
  db: SqlClient,
  tables: OutboxTables,
  options: PartitionRetentionOptions,
  stopping: () => boolean = () => false,
): Promise<PartitionRetentionResult> {
  const { keepClosedForMs, batchSize } = options;
  const made = await createPartitionsAhead(connection, tables, options.partitionsAhead);
  // A range is a candidate once its last day ended before now - keepClosedForMs; today's never is.
  const [{ before }] = await connection.run<{ before: Day }>(
    `select to_char(((now() - ${Number(keepClosedForMs)} * interval '1 millisecond') at time zone 'utc')::date, 'YYYY-MM-DD') as before`,
  );
  const dropped: string[] = [];
  const held: PartitionRetentionResult['held'] = [];
  for (const partition of await outboxPartitions(connection, tables)) {
    if (partition.to > before || stopping()) break;
    while ((await moveForward(db, keepClosedForMs, partition.from, partition.to, batchSize)) === batchSize) {
      if (stopping()) return { made, dropped, held };
    }
    if (!(await dropPartition(connection, tables, partition, keepClosedForMs))) {
      held.push({ partition: partition.name, rows: await heldRows(connection, partition, keepClosedForMs) });
      continue;
    }
    dropped.push(partition.name);
    await deleteDroppedKeys(connection, tables, partition, batchSize);
  }
  return { made, dropped, held };
}
