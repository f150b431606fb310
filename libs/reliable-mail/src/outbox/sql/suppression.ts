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

// The pages of the list, in the order of its primary key: as the unsubscribes' (unsubscribe/sql/unsubscribes.ts),
// one statement per keyset, which is then the index condition of the generic plan each is given.

/** From the address `$2` (included): a search's start, or '' for the first page. */
const LIST_FROM = new Statement((t) => ({
  name: 'reliable_mail_list_suppressions',
  text: `select address, reason, source, outbox_id, created_at from ${t.suppression}
         where address >= $2::text order by address limit $1`,
}));

/** After the address `$2` (a page's last, excluded), and still from the address `$3` of the search. */
const LIST_AFTER = new Statement((t) => ({
  name: 'reliable_mail_list_suppressions_after',
  text: `select address, reason, source, outbox_id, created_at from ${t.suppression}
         where address > $2::text and address >= $3::text order by address limit $1`,
}));

/** Addresses in order, after `after` (a page's last, excluded) and from `from` (a search's start, included). */
export async function listSuppressions(
  db: SqlClient,
  limit: number,
  after?: string,
  from = '',
): Promise<Suppression[]> {
  const rows =
    after === undefined
      ? await db.query<SuppressionRecord>(LIST_FROM, [limit, from])
      : await db.query<SuppressionRecord>(LIST_AFTER, [limit, after, from]);
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
