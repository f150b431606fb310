import { isFunction, member, rowsOf, type TransactionAdapter, type TransactionEnds } from '../caller-transaction.js';

interface TypeOrmQueryRunner {
  readonly isTransactionActive: boolean;
  readonly transactionDepth?: number;
  readonly connection: { subscribers: object[] };
  query(text: string, values: unknown[], structured: true): Promise<{ records: unknown[] }>;
}

const marked = (tx: unknown, kind: string): boolean =>
  typeof tx === 'object' && tx !== null && member(tx, '@instanceof') === Symbol.for(kind);

/**
 * TypeORM: the `EntityManager` of a transaction (`dataSource.transaction(manager => …)`), a `Repository` of one, or a
 * `QueryRunner` after `startTransaction()`. A data source, or its own manager, is in no transaction. Statements go
 * through the query runner, whose structured result gives rows whatever the command (its plain result is
 * `[rows, count]` for an UPDATE).
 */
export const typeOrmAdapter: TransactionAdapter = {
  recognises: (tx) =>
    isQueryRunner(tx) ||
    marked(tx, 'EntityManager') ||
    marked(tx, 'DataSource') ||
    marked(member(tx, 'manager'), 'EntityManager'),
  open(tx, ends) {
    const runner = queryRunnerOf(tx);
    if (!runner?.isTransactionActive) return null;
    // A nested transaction is a savepoint, whose release TypeORM reports as a commit too.
    const topLevel = (runner.transactionDepth ?? 1) <= 1;
    if (topLevel) listenForCommits(runner, ends);
    return {
      endReported: topLevel ? runner : undefined,
      async query<R>(text: string, values: readonly unknown[]) {
        return rowsOf<R>(await runner.query(text, [...values], true), 'records');
      },
    };
  },
};

/** A query runner carries no marker, as TypeORM's managers and data sources do; no other client has these. */
function isQueryRunner(tx: object): boolean {
  return typeof member(tx, 'isTransactionActive') === 'boolean' && isFunction(tx, 'startTransaction');
}

function queryRunnerOf(tx: object): TypeOrmQueryRunner | undefined {
  if (isQueryRunner(tx)) return tx as TypeOrmQueryRunner;
  if (marked(tx, 'DataSource')) return undefined;
  const manager = marked(tx, 'EntityManager') ? tx : (member(tx, 'manager') as object);
  return member(manager, 'queryRunner') as TypeOrmQueryRunner | undefined;
}

/** The data sources a subscriber was added to, and for which `ends`. */
const subscribed = new WeakMap<object, TransactionEnds>();

function listenForCommits(runner: TypeOrmQueryRunner, ends: TransactionEnds): void {
  const dataSource = runner.connection;
  if (subscribed.get(dataSource) === ends) return;
  subscribed.set(dataSource, ends);
  // TypeORM reports a savepoint's release and rollback with these events too: only the outer transaction's, at
  // depth 1, ends it. Its rollback is taken before it is sent, as one that fails (a killed connection) reports
  // nothing after. TypeORM awaits its subscribers inside the caller's commit: ended() never throws.
  dataSource.subscribers.push({
    afterTransactionCommit: ({ queryRunner }: { queryRunner: TypeOrmQueryRunner }) => {
      if (!queryRunner.isTransactionActive) ends.ended(queryRunner, true);
    },
    beforeTransactionRollback: ({ queryRunner }: { queryRunner: TypeOrmQueryRunner }) => {
      if ((queryRunner.transactionDepth ?? 1) <= 1) ends.ended(queryRunner, false);
    },
  });
}
