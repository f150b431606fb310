import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { OutboxStatus } from '../../outbox/mail.types.js';
import { hasSearchedKey, type SearchedRows, type SearchFilter, type Where, whereOf } from '../../outbox/sql/filter.js';
import { toDate } from '../../outbox/sql/timestamps.js';
import type { MailListItem } from '../console-data.types.js';

/**
 * How far a row's id (UUIDv7, from the enqueuing process's clock when it built the row) may be from its
 * created_at (the database's clock when the transaction began): the transaction's age at the enqueue, and the
 * clocks' difference. A period of creation is also read as this much wider a range of ids.
 */
const ID_TIME_MARGIN_MS = 3_600_000;

/** The smallest UUIDv7 of a time in ms: every id made at that time or after sorts at or after it. */
function uuidFloor(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000`;
}

/**
 * A page of the search, newest first, from the primary key: `order by id desc limit` walks it backwards and stops
 * at the page's end, unless a narrow field's index (recipients, metadata, an id, a provider id) is the cheaper way,
 * which the planner sees from the filter's values (the statement is unnamed, so planned with them). A period of
 * creation bounds the walk too, through the ids (see ID_TIME_MARGIN_MS): without it `createdBefore` a week ago had
 * to read every newer row to find its first one (1 s at 1,000,000 rows). A row of the list carries its subject,
 * template and `to` addresses, not its payload or history: what the list shows, read in one pass over the payload.
 * One row more than the page tells whether there is a next one. A recipient or a metadata value is searched in the
 * closed rows and the open ones apart, a page of each, merged (see SearchedRows).
 */
export async function mailPage(
  db: SqlClient,
  filter: SearchFilter,
  limit: number,
  before?: string,
): Promise<{ items: MailListItem[]; next: string | null }> {
  const sides: SearchedRows[] = hasSearchedKey(filter) ? ['closed', 'open'] : ['all'];
  // Each side's where clause numbers the same values alike, so both take the one list of parameters.
  const wheres = sides.map((rows) => whereOf(filter, 5, rows));
  const from = filter.createdAfter ? uuidFloor(filter.createdAfter.getTime() - ID_TIME_MARGIN_MS) : null;
  const until = filter.createdBefore ? uuidFloor(filter.createdBefore.getTime() + ID_TIME_MARGIN_MS) : null;
  const rows = await db.query<ListRecord>(
    new Statement((t) => {
      // One statement, so one snapshot: a row that moves from open to closed between two would be on both
      // sides, or on neither.
      const side = (
        where: Where,
      ) => `(select o.id, o.status, o.lane, o.attempts, o.created_at, o.last_error, o.metadata,
                    shown.subject, shown.template, shown.recipients
             from ${t.outbox} o
             cross join lateral (
               select p->>'subject' as subject, p->'template'->>'name' as template,
                      jsonb_path_query_array(p, '$.to[*].address') as recipients
               from (select o.payload - 'text' - 'html' - 'attachments' as p offset 0) light
             ) shown
             where ${where.sql} and ($2::uuid is null or o.id < $2)
               and ($3::uuid is null or o.id >= $3) and ($4::uuid is null or o.id < $4)
             order by o.id desc limit $1)`;
      return {
        text:
          wheres.length === 1
            ? side(wheres[0])
            : `select * from (${wheres.map(side).join(' union all ')}) page order by id desc limit $1`,
      };
    }),
    [limit + 1, before ?? null, from, until, ...wheres[0].values],
  );
  return {
    items: rows.slice(0, limit).map(toListItem),
    next: rows.length > limit ? rows[limit - 1].id : null,
  };
}

interface ListRecord {
  id: string;
  status: OutboxStatus;
  lane: string;
  attempts: number;
  created_at: Date;
  last_error: string | null;
  metadata: Record<string, unknown> | null;
  subject: string | null;
  template: string | null;
  recipients: string[];
}

function toListItem(row: ListRecord): MailListItem {
  return {
    id: row.id,
    status: row.status,
    lane: row.lane,
    subject: row.subject ?? '',
    template: row.template,
    to: row.recipients,
    attempts: row.attempts,
    createdAt: toDate(row.created_at),
    lastError: row.last_error,
    metadata: row.metadata,
  };
}
