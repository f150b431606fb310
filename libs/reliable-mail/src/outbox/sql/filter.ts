import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { OutboxStatus } from '../mail.types.js';
import type { OutboxFilter } from '../operations.types.js';

/**
 * Turns an operator's filter into a where clause over `mail_outbox o` whose placeholders start at `$first`; the
 * SQL never holds a value.
 */
export function whereOf(filter: OutboxFilter, first: number): { sql: string; values: unknown[] } {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const add = (clause: (placeholder: string) => string, value: unknown) => {
    values.push(value);
    clauses.push(clause(`$${first + values.length - 1}`));
  };
  if (filter.ids !== undefined) add((p) => `o.id = any(${p}::uuid[])`, filter.ids);
  if (filter.status !== undefined) add((p) => `o.status = any(${p}::text[])`, [filter.status].flat());
  if (filter.lane !== undefined) add((p) => `o.lane = ${p}`, filter.lane);
  if (filter.recipient !== undefined) {
    add(
      (p) => `exists (select 1 from jsonb_array_elements((o.payload->'to') || (o.payload->'cc') || (o.payload->'bcc')) r
                      where lower(r->>'address') = lower(${p}))`,
      filter.recipient,
    );
  }
  if (filter.idempotencyKey !== undefined) add((p) => `o.idempotency_key = ${p}`, filter.idempotencyKey);
  if (filter.metadata !== undefined) add((p) => `o.metadata @> ${p}::jsonb`, JSON.stringify(filter.metadata));
  if (filter.createdAfter !== undefined) add((p) => `o.created_at >= ${p}`, filter.createdAfter);
  if (filter.createdBefore !== undefined) add((p) => `o.created_at < ${p}`, filter.createdBefore);
  return { sql: clauses.length > 0 ? clauses.join(' and ') : 'true', values };
}

/** The ids of the rows in `statuses` matching the filter: what a verb would change, for its dry run. */
export async function matchingIds(
  db: SqlClient,
  filter: OutboxFilter,
  statuses: readonly OutboxStatus[],
): Promise<string[]> {
  const where = whereOf(filter, 2);
  const rows = await db.query<{ id: string }>(
    new Statement((t) => ({
      text: `select o.id from ${t.outbox} o where o.status = any($1::text[]) and ${where.sql} order by o.id`,
    })),
    [statuses, ...where.values],
  );
  return rows.map((row) => row.id);
}

/** How many rows in `statuses` match the filter: what purge would delete, for its dry run, without their ids. */
export async function countMatching(
  db: SqlClient,
  filter: OutboxFilter,
  statuses: readonly OutboxStatus[],
): Promise<number> {
  const where = whereOf(filter, 2);
  const [row] = await db.query<{ count: number }>(
    new Statement((t) => ({
      text: `select count(*)::int as count from ${t.outbox} o where o.status = any($1::text[]) and ${where.sql}`,
    })),
    [statuses, ...where.values],
  );
  return row.count;
}
