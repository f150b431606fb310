import { type SqlClient, Statement } from '../../database/sql-client.js';
import { recipientAddresses } from '../../schema/versions/0008-console.js';

/**
 * Which recipients of the given rows are on the suppression list: a requeue warns of them by name, since they stay
 * suppressed. Up to 50, from the recipients index's expression, one probe of the list's primary key per address.
 */
const SUPPRESSED_RECIPIENTS = new Statement((t) => ({
  text: `select distinct s.address from ${t.outbox} o
         cross join lateral jsonb_array_elements_text(${recipientAddresses('o.payload')}) r(address)
         join ${t.suppression} s on s.address = r.address
         where o.id = any($1::uuid[]) order by s.address limit 50`,
}));

export async function suppressedRecipients(db: SqlClient, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db.query<{ address: string }>(SUPPRESSED_RECIPIENTS, [ids]);
  return rows.map((row) => row.address);
}
