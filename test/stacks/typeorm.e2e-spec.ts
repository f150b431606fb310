import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type QueryRunner } from 'typeorm';
import { describeStack, type StackSession } from '../support/stacks/stack-cases.js';

const ENTITY_MANAGER = 'the EntityManager of dataSource.transaction()';
const QUERY_RUNNER = 'a QueryRunner after startTransaction()';

describeStack({
  stack: 'TypeORM',
  styles: [ENTITY_MANAGER, QUERY_RUNNER],
  outsideWays: ['no tx', "the data source's own manager as tx", 'a QueryRunner with no transaction started as tx'],
  imports: (url) => [TypeOrmModule.forRoot({ type: 'postgres', url, entities: [], synchronize: false })],
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
        if (style === ENTITY_MANAGER) {
          return dataSource.transaction((manager) =>
            work({ target: { tx: manager }, execute: (sql) => manager.query(sql) }),
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
        return work({ tx: dataSource.manager });
      },
      close: async () => undefined,
    };
  },
});
