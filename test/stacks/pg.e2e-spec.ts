import { expect, it } from '@jest/globals';
import { MailValidationError } from '@reliable-mail/nestjs';
import pg from 'pg';
import {
  describeStack,
  outboxRows,
  quietPool,
  type StackSession,
  type TransactionWork,
} from '../support/stacks/stack-cases.js';
import { withClient } from '../support/test-database.js';

const POOL_CLIENT = 'a PoolClient after BEGIN';
const CLIENT = 'a pg.Client after BEGIN';
const IDLE_POOL_CLIENT = 'a PoolClient on which no BEGIN ran, as tx';
const IDLE_CLIENT = 'a pg.Client on which no BEGIN ran, as tx';

let pool: pg.Pool;

/** A client of the pool, released after `work`. */
async function withPoolClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await work(client);
  } finally {
    client.release();
  }
}

async function inBegin<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  await client.query('begin');
  try {
    const result = await work();
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback');
    throw error;
  }
}

describeStack({
  stack: 'pg',
  styles: [POOL_CLIENT, CLIENT],
  outsideWays: ['no tx', IDLE_POOL_CLIENT, IDLE_CLIENT],
  async open(_app, databaseUrl): Promise<StackSession> {
    pool = quietPool(databaseUrl, 20);
    const inTransaction = <T>(client: pg.ClientBase, work: TransactionWork<T>) =>
      inBegin(client, () => work({ target: { tx: client }, execute: (sql) => client.query(sql) }));
    return {
      transaction: (style, work) =>
        style === POOL_CLIENT
          ? withPoolClient((client) => inTransaction(client, work))
          : withClient(databaseUrl, (client) => inTransaction(client, work)),
      outside(way, work) {
        if (way === IDLE_POOL_CLIENT) return withPoolClient((client) => work({ tx: client }));
        if (way === IDLE_CLIENT) return withClient(databaseUrl, (client) => work({ tx: client }));
        return work({});
      },
      close: () => pool.end(),
    };
  },
  extraCases(fixture) {
    it('a pool as tx is refused before anything is written: its queries may each take another connection', async () => {
      const { outbox } = fixture();
      const metadata = { case: 'pg-pool-as-tx' };
      await expect(
        outbox.enqueue({ to: 'pool@example.com', subject: 'Pool', text: 'x' }, { tx: pool, metadata }),
      ).rejects.toBeInstanceOf(MailValidationError);
      expect(await outboxRows(fixture(), 'pg-pool-as-tx')).toEqual([]);
    });

    it('a BEGIN sent but not yet answered counts: the enqueue joins its transaction, and rolls back with it', async () => {
      const { outbox } = fixture();
      const metadata = { case: 'pg-begin-in-flight' };
      await withPoolClient(async (client) => {
        // Not awaited: the client's last answer from the server still says idle.
        const begun = client.query('begin');
        await outbox.enqueue({ to: 'in-flight@example.com', subject: 'Hi', text: 'x' }, { tx: client, metadata });
        await begun;
        await client.query('rollback');
      });
      expect(await outboxRows(fixture(), 'pg-begin-in-flight')).toEqual([]);
    });
  },
});
