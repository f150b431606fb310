import { Kysely, PostgresDialect, sql } from 'kysely';
import { describeStack, quietPool, type StackSession } from '../support/stacks/stack-cases.js';

const TRANSACTION = 'db.transaction().execute()';
const CONTROLLED = 'db.startTransaction() (a controlled transaction)';

describeStack({
  stack: 'Kysely',
  styles: [TRANSACTION, CONTROLLED],
  outsideWays: ['no tx', 'the root Kysely as tx'],
  async open(_app, databaseUrl): Promise<StackSession> {
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: quietPool(databaseUrl) }) });
    return {
      async transaction(style, work) {
        if (style === TRANSACTION) {
          return db
            .transaction()
            .execute((trx) => work({ target: { tx: trx }, execute: (text) => sql.raw(text).execute(trx) }));
        }
        const trx = await db.startTransaction().execute();
        try {
          const result = await work({ target: { tx: trx }, execute: (text) => sql.raw(text).execute(trx) });
          await trx.commit().execute();
          return result;
        } catch (error) {
          if (!trx.isCommitted) await trx.rollback().execute();
          throw error;
        }
      },
      outside: (way, work) => work(way === 'no tx' ? {} : { tx: db }),
      close: () => db.destroy(),
    };
  },
});
