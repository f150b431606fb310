import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { describeStack, quietPool, type StackSession } from '../support/stacks/stack-cases.js';

const TRANSACTION = 'db.transaction()';
const NESTED = 'a nested tx.transaction() (a savepoint) of db.transaction()';

describeStack({
  stack: 'Drizzle (node-postgres)',
  styles: [TRANSACTION, NESTED],
  outsideWays: ['no tx', 'the root drizzle db as tx'],
  async open(_app, databaseUrl): Promise<StackSession> {
    const pool = quietPool(databaseUrl);
    const db: NodePgDatabase = drizzle({ client: pool });
    return {
      transaction: (style, work) =>
        db.transaction(async (outer) => {
          const run = (tx: typeof outer) => work({ target: { tx }, execute: (text) => tx.execute(sql.raw(text)) });
          return style === NESTED ? outer.transaction(run) : run(outer);
        }),
      outside: (way, work) => work(way === 'no tx' ? {} : { tx: db }),
      close: () => pool.end(),
    };
  },
});
