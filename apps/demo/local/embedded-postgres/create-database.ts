import pg from 'pg';
import { logger, PASSWORD, USER } from './cluster.js';

/** Creates `database` on the server at 127.0.0.1:`port` unless it exists: the first start, or after a drop. */
export async function createDatabase(port: number, database: string): Promise<void> {
  const admin = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres' });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [database]);
    if (!rowCount) {
      await admin.query(`create database ${admin.escapeIdentifier(database)}`);
      logger.log(`Created database "${database}"`);
    }
  } finally {
    await admin.end();
  }
}
