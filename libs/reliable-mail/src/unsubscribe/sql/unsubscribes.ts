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

/** Unsubscribes in the order of their primary key, after the pair `$2`, `$3` (a page's last, excluded). */
const LIST = new Statement((t) => ({
  text: `select address, category, outbox_id, created_at from ${t.unsubscribe}
         where $2::text is null or (address, category) > ($2::text, $3::text)
         order by address, category limit $1`,
}));

/** Where a page of unsubscribes starts: after the last of the page before. */
export interface UnsubscribeCursor {
  address: string;
  category: string;
}

export async function listUnsubscribes(
  db: SqlClient,
  limit: number,
  after: UnsubscribeCursor | undefined,
): Promise<Unsubscribe[]> {
  const rows = await db.query<{ address: string; category: string; outbox_id: string | null; created_at: Date }>(LIST, [
    limit,
    after?.address ?? null,
    after?.category ?? null,
  ]);
  return rows.map((row) => ({
    address: row.address,
    category: row.category,
    outboxId: row.outbox_id,
    createdAt: toDate(row.created_at),
  }));
}
