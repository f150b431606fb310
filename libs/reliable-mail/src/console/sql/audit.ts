import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from '../../outbox/sql/timestamps.js';
import { uuidv7 } from '../../outbox/uuid-v7.js';
import type { AuditEntry } from '../console-data.types.js';

/** What an operator did, as the controller records it. */
export interface NewAuditEntry {
  actor: string;
  action: string;
  reason: string | null;
  /** The filter the action was given (as checked: an OutboxFilter, a ConsoleFilter), stored as its JSON. */
  filter: object | null;
  /** The rows it changed (or named); a row's timeline finds the entry by any of them. */
  outboxIds: string[];
}

export interface AuditRecord {
  id: string;
  actor: string;
  action: string;
  reason: string | null;
  filter: Record<string, unknown> | null;
  outbox_ids: string[];
  created_at: Date | string;
}

export function toAuditEntry(row: AuditRecord): AuditEntry {
  return {
    id: row.id,
    actor: row.actor,
    action: row.action,
    reason: row.reason,
    filter: row.filter,
    outboxIds: row.outbox_ids,
    createdAt: toDate(row.created_at),
  };
}

// One row per action, in the transaction of the action when the controller runs both in one: an action and its
// audit are kept or lost together. Its id is a UUIDv7, so the newest entries are the primary key's last pages.
const RECORD = new Statement((t) => ({
  name: 'reliable_mail_console_record_audit',
  text: `insert into ${t.audit} (id, actor, action, reason, filter, outbox_ids)
         values ($1, $2, $3, $4, $5::jsonb, $6::uuid[]) returning *`,
}));

export async function recordAudit(db: SqlClient, entry: NewAuditEntry): Promise<AuditEntry> {
  const [row] = await db.query<AuditRecord>(RECORD, [
    uuidv7(),
    entry.actor,
    entry.action,
    entry.reason,
    entry.filter === null ? null : JSON.stringify(entry.filter),
    entry.outboxIds,
  ]);
  return toAuditEntry(row);
}

// Newest first by the time-ordered primary key, read backwards from its end (or from `before`): a page costs its
// own rows whatever the table's size.
const LIST = new Statement((t) => ({
  name: 'reliable_mail_console_list_audit',
  text: `select * from ${t.audit} where ($2::uuid is null or id < $2) order by id desc limit $1`,
}));

export async function listAudit(db: SqlClient, limit: number, before?: string): Promise<AuditEntry[]> {
  const rows = await db.query<AuditRecord>(LIST, [limit, before ?? null]);
  return rows.map(toAuditEntry);
}
