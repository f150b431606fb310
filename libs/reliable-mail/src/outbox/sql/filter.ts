import { type SqlClient, Statement } from '../../database/sql-client.js';
import { recipientAddresses } from '../../schema/versions/0008-console.js';
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
export function whereOf(filter: SearchFilter, first: number): Where {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const add = (clause: (placeholder: string) => string, value: unknown) => {
    values.push(value);
    clauses.push(clause(`$${first + values.length - 1}`));
  };
  if (filter.ids !== undefined) add((p) => `o.id = any(${p}::uuid[])`, filter.ids);
  if (filter.status !== undefined) add((p) => `o.status = any(${p}::text[])`, [filter.status].flat());
  if (filter.lane !== undefined) add((p) => `o.lane = ${p}`, filter.lane);
  // The expression of the recipients' GIN index (schema version 8), written as it is there so that the planner
  // takes the index: one address among a million rows is then a few index pages, where reading every payload's
  // to, cc and bcc was a scan of the table.
  if (filter.recipient !== undefined) {
    add((p) => `(${recipientAddresses('o.payload')}) @> jsonb_build_array(lower(${p}::text))`, filter.recipient);
  }
  if (filter.idempotencyKey !== undefined) add((p) => `o.idempotency_key = ${p}`, filter.idempotencyKey);
  if (filter.metadata !== undefined) add((p) => `o.metadata @> ${p}::jsonb`, JSON.stringify(filter.metadata));
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
