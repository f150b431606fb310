import type pg from 'pg';
import type { SqlClient, Statement } from '../../libs/reliable-mail/src/database/sql-client.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';

/** Runs reliable-mail's statements on a pool of the test's own, named as the dispatcher prepares them. */
export function sqlClientOf(pool: pg.Pool): SqlClient {
  return {
    async query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
      const { name, text } = statement.in(tablesIn(DEFAULT_SCHEMA));
      const result = await pool.query({ name, text, values: [...values] });
      return result.rows as R[];
    },
  };
}
