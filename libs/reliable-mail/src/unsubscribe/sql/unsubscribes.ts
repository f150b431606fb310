import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { Unsubscribe } from '../../outbox/operations.types.js';
import { toDate } from '../../outbox/sql/timestamps.js';
import type { UnsubscribeRequest } from '../unsubscribe-token.js';

// The unsubscribes, one row per (address, category), read by the claim (claim.ts) through their primary key.

const ADD = new Statement((t) => ({
  text: `insert into ${t.unsubscribe} (address, category, outbox_id) values ($1, $2, $3)
         on conflict (address, category) do nothing returning address`,
}));

const REMOVE = new Statement((t) => ({
  text: `delete from ${t.unsubscribe} where address = $1 and category = $2 returning address`,
}));

/** Records an unsubscribe; returns whether it is new. A repeat keeps the first, and the mail its link came in. */
export async function addUnsubscribe(
  db: SqlClient,
  { address, category, rowId }: UnsubscribeRequest,
): Promise<boolean> {
  return (await db.query(ADD, [address, category, rowId])).length > 0;
}

/** Takes an unsubscribe back; returns whether there was one. */
export async function removeUnsubscribe(db: SqlClient, address: string, category: string): Promise<boolean> {
  return (await db.query(REMOVE, [address, category])).length > 0;
}

// The pages of unsubscribes, in the order of their primary key. Each statement is planned once (a generic plan), so
// each has its keyset in its text, where it is the primary key's index condition: an optional one (`$2 is null or
// ...`) was only a filter, and every page read the index from its first entry.

/** From the address `$2` (included): a search's start, or '' for the first page. */
const LIST_FROM = new Statement((t) => ({
  name: 'reliable_mail_list_unsubscribes',
  text: `select address, category, outbox_id, created_at from ${t.unsubscribe}
         where address >= $2::text
         order by address, category limit $1`,
}));

/** After the pair `$2`, `$3` (a page's last, excluded), and still from the address `$4` of the search. */
const LIST_AFTER = new Statement((t) => ({
  name: 'reliable_mail_list_unsubscribes_after',
  text: `select address, category, outbox_id, created_at from ${t.unsubscribe}
         where (address, category) > ($2::text, $3::text) and address >= $4::text
         order by address, category limit $1`,
}));

/** Where a page of unsubscribes starts: after the last of the page before. */
export interface UnsubscribeCursor {
  address: string;
  category: string;
}

interface UnsubscribeRecord {
  address: string;
  category: string;
  outbox_id: string | null;
  created_at: Date | string;
}

/** Unsubscribes in address and category order, after `after` (a page's last) and from `from` (a search's start). */
export async function listUnsubscribes(
  db: SqlClient,
  limit: number,
  after: UnsubscribeCursor | undefined,
  from = '',
): Promise<Unsubscribe[]> {
  const rows = after
    ? await db.query<UnsubscribeRecord>(LIST_AFTER, [limit, after.address, after.category, from])
    : await db.query<UnsubscribeRecord>(LIST_FROM, [limit, from]);
  return rows.map((row) => ({
    address: row.address,
    category: row.category,
    outboxId: row.outbox_id,
    createdAt: toDate(row.created_at),
  }));
}
