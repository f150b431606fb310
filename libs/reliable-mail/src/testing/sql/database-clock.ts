import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from '../../outbox/sql/timestamps.js';

// Where `MailTester.reset` draws its line. A row's created_at is the database's clock (`now()` of its transaction),
// which the test process's clock need not match (PostgreSQL in a container or a VM is often seconds apart), so the
// line is drawn on the database's clock too.
const DATABASE_CLOCK = new Statement(() => ({
  name: 'reliable_mail_database_clock',
  text: 'select clock_timestamp() as now',
}));

export async function databaseClock(db: SqlClient): Promise<Date> {
  const [row] = await db.query<{ now: Date }>(DATABASE_CLOCK, []);
  return toDate(row.now);
}
