import { type SqlClient, Statement } from '../../database/sql-client.js';
import { UUID_SOURCE } from '../../shared/uuid.js';
import type { OutboxStatus } from '../mail.types.js';
import type { OutboxFilter } from '../operations.types.js';

/** The fields only the console searches by (see ConsoleFilter); the admin's verbs refuse them. */
export interface SearchFilter extends OutboxFilter {
  messageId?: string;
  providerMessageId?: string;
}

/** A filter's where clause over `mail_outbox o`, and the values of its placeholders. */
export interface Where {
  sql: string;
  values: unknown[];
}

/**
 * Which rows a filter's clause is written for. A search key the console's indexes hold for closed rows only
 * (SEARCHED_STATUSES_PREDICATE, schema version 8) is found in closed rows through them and in open ones (the
 * backlog) through the dispatcher's partial indexes: `all` rows in one clause (a statement that reads every match:
 * a count, a verb), or the `closed` and the `open` ones apart, for a page, where each side's `order by id limit`
 * then has one index to choose (a key a few hundred mails share: 15 ms, against 155 ms when one statement's planner
 * preferred walking the primary key).
 */
export type SearchedRows = 'all' | 'closed' | 'open';

/**
 * The clause of a search key, `closed` and `open` being its condition for each side. In `all`, the open arms spell
 * it with another operator (`&&` for a one-element array, `<@` turned round): spelled alike in the three arms, the
 * planner takes it out of them as a common factor, and then can use none of the indexes (400 ms, a scan of the
 * table, for an address among 1,000,000 rows); apart, it reads a BitmapOr of them (13-24 ms).
 */
function searched(rows: SearchedRows, closed: string, open: string): string {
  const closedRows = `(o.status not in ('pending', 'sending') and ${closed})`;
  const openRows = `((o.status = 'pending' or o.status = 'sending') and ${open})`;
  if (rows === 'closed') return closedRows;
  if (rows === 'open') return openRows;
  return `(${closedRows} or (o.status = 'pending' and ${open}) or (o.status = 'sending' and ${open}))`;
}

/** Whether the filter has a key of the closed rows' indexes, whose page is read in two statements. */
export function hasSearchedKey(filter: SearchFilter): boolean {
  return filter.recipient !== undefined || filter.metadata !== undefined;
}

/** `<id@domain>`, with or without the brackets, as enqueue writes a Message-ID. */
const MESSAGE_ID = new RegExp(`^<?(${UUID_SOURCE})@[^<>@\\s]+>?$`, 'i');

/** The row id a Message-ID names, or null when it is not one of reliable-mail's (it then matches no row). */
export function rowIdOfMessageId(messageId: string): string | null {
  return MESSAGE_ID.exec(messageId.trim())?.[1].toLowerCase() ?? null;
}

/**
 * Turns an operator's filter into a where clause over `mail_outbox o` whose placeholders start at `$first`; the
 * SQL never holds a value. Each field's clause is one an index answers when that field is the narrow one.
 */
export function whereOf(filter: SearchFilter, first: number, rows: SearchedRows = 'all'): Where {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const add = (clause: (placeholder: string) => string, value: unknown) => {
    values.push(value);
    clauses.push(clause(`$${first + values.length - 1}`));
  };
  if (filter.ids !== undefined) add((p) => `o.id = any(${p}::uuid[])`, filter.ids);
  if (filter.status !== undefined) add((p) => `o.status = any(${p}::text[])`, [filter.status].flat());
  if (filter.lane !== undefined) add((p) => `o.lane = ${p}`, filter.lane);
  // Lower-cased here, as enqueue writes the column (JavaScript's case folding, not the database's locale's).
  if (filter.recipient !== undefined) {
    add((p) => {
      const address = `array[${p}::text]`;
      return searched(rows, `o.recipients @> ${address}`, `o.recipients && ${address}`);
    }, filter.recipient.trim().toLowerCase());
  }
  if (filter.idempotencyKey !== undefined) add((p) => `o.idempotency_key = ${p}`, filter.idempotencyKey);
  if (filter.metadata !== undefined) {
    add(
      (p) => searched(rows, `o.metadata @> ${p}::jsonb`, `${p}::jsonb <@ o.metadata`),
      JSON.stringify(filter.metadata),
    );
  }
  if (filter.createdAfter !== undefined) add((p) => `o.created_at >= ${p}`, filter.createdAfter);
  if (filter.createdBefore !== undefined) add((p) => `o.created_at < ${p}`, filter.createdBefore);
  if (filter.messageId !== undefined) {
    // The Message-ID is `<id@domain>`: the primary key finds it. One of another shape was never reliable-mail's.
    const id = rowIdOfMessageId(filter.messageId);
    if (id === null) clauses.push('false');
    else add((p) => `o.id = ${p}::uuid`, id);
  }
  // The provider's id of the send, or of any request of it (SES, one per batch of recipients): each has an index,
  // and `or` of the two is a BitmapOr of them.
  if (filter.providerMessageId !== undefined) {
    add(
      (p) => `(o.provider_message_id = ${p}::text or o.provider_message_ids @> array[${p}::text])`,
      filter.providerMessageId,
    );
  }
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
