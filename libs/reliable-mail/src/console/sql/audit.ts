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
  rows: number;
  first_outbox_id: string | null;
  created_at: Date | string;
}

/** An entry as the console reads it, `a` the audit table: how many rows, not which, beyond the first. */
export const AUDIT_COLUMNS = `a.id, a.actor, a.action, a.reason, a.filter, cardinality(a.outbox_ids) as rows,
  a.outbox_ids[1] as first_outbox_id, a.created_at`;

export function toAuditEntry(row: AuditRecord): AuditEntry {
  return {
    id: row.id,
    actor: row.actor,
    action: row.action,
    reason: row.reason,
    filter: row.filter,
    rows: row.rows,
    firstOutboxId: row.first_outbox_id,
    createdAt: toDate(row.created_at),
  };
}

// One row per action, in the transaction of the action when the controller runs both in one: an action and its
// audit are kept or lost together. Its id is a UUIDv7, so the newest entries are the primary key's last pages.
const RECORD = new Statement((t) => ({
  name: 'reliable_mail_console_record_audit',
  text: `insert into ${t.audit} as a (id, actor, action, reason, filter, outbox_ids)
         values ($1, $2, $3, $4, $5::jsonb, $6::uuid[]) returning ${AUDIT_COLUMNS}`,
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
  text: `select ${AUDIT_COLUMNS} from ${t.audit} a where ($2::uuid is null or a.id < $2) order by a.id desc limit $1`,
}));

export async function listAudit(db: SqlClient, limit: number, before?: string): Promise<AuditEntry[]> {
  const rows = await db.query<AuditRecord>(LIST, [limit, before ?? null]);
  return rows.map(toAuditEntry);
}
