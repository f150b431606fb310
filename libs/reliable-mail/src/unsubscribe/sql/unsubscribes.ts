import { type SqlClient, Statement } from '../../database/sql-client.js';
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
