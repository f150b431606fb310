import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from '../../outbox/sql/timestamps.js';
import type { AuditEntry, PendingEvent } from '../console-data.types.js';
import { AUDIT_COLUMNS, type AuditRecord, toAuditEntry } from './audit.js';

export interface TimelineExtras {
  traceparent: string | null;
  events: PendingEvent[];
  audit: AuditEntry[];
}

/**
 * What a timeline shows beside the row and its history (read as `get` reads them, list.ts): the row's trace
 * context by primary key, its events not yet confirmed, and the operators' actions naming it, by the audit's GIN
 * index on outbox_ids. The events have no index by row: the table holds only unconfirmed events (confirmed ones
 * are deleted), a few thousand at most, read in a millisecond. One statement, under a millisecond at 1,000,000
 * rows. Unnamed, so planned at each run: a plan kept from an empty audit table would scan it whole.
 */
const EXTRAS = new Statement((t) => ({
  text: `select o.traceparent,
    coalesce((select jsonb_agg(jsonb_build_object('id', e.id::text, 'name', e.name, 'createdAt', e.created_at,
                                                  'lockedUntil', e.locked_until) order by e.id)
              from ${t.event} e where e.outbox_id = o.id), '[]'::jsonb) as events,
    coalesce((select jsonb_agg(to_jsonb(entry) order by entry.id desc)
              from (select ${AUDIT_COLUMNS} from ${t.audit} a where a.outbox_ids @> array[o.id]) entry), '[]'::jsonb) as audit
  from ${t.outbox} o where o.id = $1`,
}));

interface ExtrasRecord {
  traceparent: string | null;
  events: Array<{ id: string; name: string; createdAt: string; lockedUntil: string }>;
  audit: AuditRecord[];
}

export async function timelineExtras(db: SqlClient, id: string): Promise<TimelineExtras | null> {
  const [row] = await db.query<ExtrasRecord>(EXTRAS, [id]);
  if (!row) return null;
  return {
    traceparent: row.traceparent,
    events: row.events.map((event) => ({
      id: event.id,
      name: event.name,
      createdAt: toDate(event.createdAt),
      lockedUntil: toDate(event.lockedUntil),
    })),
    audit: row.audit.map(toAuditEntry),
  };
}
