import type { Suppression } from '../operations.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from './timestamps.js';

// The suppression list: addresses that get no mail, kept in lower case. Settles add hard bounces (settle.ts) and
// the claim reads it by primary key (claim.ts); these are the operators' statements.

interface SuppressionRecord {
  address: string;
  reason: string;
  source: Suppression['source'];
  outbox_id: string | null;
  created_at: Date | string;
}

/** Addresses in order, after `after` (a page's last, excluded) and from `from` (a search's start, included). */
export async function listSuppressions(
  db: SqlClient,
  limit: number,
  after?: string,
  from?: string,
): Promise<Suppression[]> {
  const rows = await db.query<SuppressionRecord>(
    new Statement((t) => ({
      text: `select * from ${t.suppression} where ($2::text is null or address > $2) and ($3::text is null or address >= $3)
             order by address limit $1`,
    })),
    [limit, after ?? null, from ?? null],
  );
  return rows.map((row) => ({
    address: row.address,
    reason: row.reason,
    source: row.source,
    outboxId: row.outbox_id,
    createdAt: toDate(row.created_at),
  }));
}

export async function addSuppression(db: SqlClient, address: string, reason: string): Promise<void> {
  await db.query(
    new Statement((t) => ({
      text: `insert into ${t.suppression} (address, reason, source) values ($1, $2, 'operator')
             on conflict (address) do update set reason = excluded.reason, source = 'operator'`,
    })),
    [address, reason],
  );
}

/** Returns whether the address was on the list. */
export async function removeSuppression(db: SqlClient, address: string): Promise<boolean> {
  const rows = await db.query(
    new Statement((t) => ({ text: `delete from ${t.suppression} where address = $1 returning address` })),
    [address],
  );
  return rows.length > 0;
}
