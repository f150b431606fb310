import { expect, it } from '@jest/globals';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, EntitySchema, type QueryRunner } from 'typeorm';
import { WakeUpNotifier } from '../../libs/reliable-mail/src/outbox/wake-up.notifier.js';
import { describeStack, type StackSession } from '../support/stacks/stack-cases.js';

const ENTITY_MANAGER = 'the EntityManager of dataSource.transaction()';
const REPOSITORY = "a Repository of that EntityManager's";
const QUERY_RUNNER = 'a QueryRunner after startTransaction()';

/** The shared cases' business table, for a repository of it. */
const Order = new EntitySchema<{ id: number; customer: string; ref: string | null }>({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: Number, primary: true, generated: true },
    customer: { type: String },
    ref: { type: String, nullable: true },
  },
});

describeStack({
  stack: 'TypeORM',
  styles: [ENTITY_MANAGER, REPOSITORY, QUERY_RUNNER],
  outsideWays: [
    'no tx',
    "the data source's own manager as tx",
    'the data source itself as tx',
    'a QueryRunner with no transaction started as tx',
  ],
  imports: (url) => [TypeOrmModule.forRoot({ type: 'postgres', url, entities: [Order], synchronize: false })],
  async open(app): Promise<StackSession> {
    const dataSource = app.get(DataSource);
    const withRunner = async <T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> => {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        return await work(runner);
      } finally {
        await runner.release();
      }
    };
    return {
      transaction(style, work) {
        if (style !== QUERY_RUNNER) {
          return dataSource.transaction((manager) =>
            work({
              target: { tx: style === REPOSITORY ? manager.getRepository(Order) : manager },
              execute: (sql) => manager.query(sql),
            }),
          );
        }
        return withRunner(async (runner) => {
          await runner.startTransaction();
          try {
            const result = await work({ target: { tx: runner }, execute: (sql) => runner.query(sql) });
            await runner.commitTransaction();
            return result;
          } catch (error) {
            if (runner.isTransactionActive) await runner.rollbackTransaction();
            throw error;
          }
        });
      },
      outside(way, work) {
        if (way === 'no tx') return work({});
        if (way.startsWith('a QueryRunner')) return withRunner((runner) => work({ tx: runner }));
        if (way.startsWith('the data source itself')) return work({ tx: dataSource });
        return work({ tx: dataSource.manager });
      },
      close: async () => undefined,
    };
  },
  extraCases(fixture) {
    it('a transaction whose connection is killed, so that its ROLLBACK fails, leaves nothing open for the wake-up', async () => {
      const { app, outbox } = fixture();
      const dataSource = app.get(DataSource);
      const killed = dataSource.transaction(async (manager) => {
        await outbox.enqueue({ to: 'killed@example.com', subject: 'Hi', text: 'x' }, { tx: manager });
        await manager.query('select pg_terminate_backend(pg_backend_pid())');
      });
      await expect(killed).rejects.toThrow();
      // With nothing open, the next enqueue NOTIFYs in its own statement.
      const next = app.get(WakeUpNotifier).plan(null);
      next.abandoned();
      expect(next.inStatement).toBe(true);
    });
  },
});
