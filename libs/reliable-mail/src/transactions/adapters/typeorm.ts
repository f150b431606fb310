import { isFunction, member, type TransactionAdapter, type TransactionEnds } from '../caller-transaction.js';

interface TypeOrmQueryRunner {
  readonly isTransactionActive: boolean;
  readonly transactionDepth?: number;
  readonly connection: { subscribers: object[] };
  query(text: string, values: unknown[], structured: true): Promise<{ records: unknown[] }>;
}

/** The data sources reliable-mail listens to for commits. */
const subscribed = new WeakMap<object, TransactionEnds>();

/**
 * TypeORM's `EntityManager` of a transaction (`dataSource.transaction(manager => …)`) or a `QueryRunner` after
 * `startTransaction()`. Statements go through the query runner, whose structured result gives rows whatever the
 * command (its plain result is `[rows, count]` for an UPDATE).
 */
export const typeOrmAdapter: TransactionAdapter = {
  stack: 'TypeORM',
  recognises: (tx) => isQueryRunner(tx) || member(tx, '@instanceof') === Symbol.for('EntityManager'),
  open(tx, ends) {
    // The data source's own manager has no query runner: it is in no transaction.
    const runner = (isQueryRunner(tx) ? tx : member(tx, 'queryRunner')) as TypeOrmQueryRunner | undefined;
    if (!runner?.isTransactionActive) return null;
    // A nested transaction is a savepoint, whose release TypeORM reports as a commit too.
    const topLevel = (runner.transactionDepth ?? 1) <= 1;
    if (topLevel) listenForCommits(runner, ends);
    return {
      stack: 'TypeORM',
      endReported: topLevel ? runner : undefined,
      async query<R>(text: string, values: readonly unknown[]) {
        return (await runner.query(text, [...values], true)).records as R[];
      },
    };
  },
};

/** A query runner carries no marker, as TypeORM's managers and data sources do; no other client has these. */
function isQueryRunner(tx: object): boolean {
  return typeof member(tx, 'isTransactionActive') === 'boolean' && isFunction(tx, 'startTransaction');
}

function listenForCommits(runner: TypeOrmQueryRunner, ends: TransactionEnds): void {
  const dataSource = runner.connection;
  if (subscribed.get(dataSource) === ends) return;
  subscribed.set(dataSource, ends);
  // TypeORM reports a savepoint's release and rollback with these events too: only the outer transaction's end,
  // after which the runner is no longer in one, is the commit. TypeORM awaits its subscribers inside the caller's
  // commit, and a hook that threw would fail a transaction that committed: ended() never throws.
  const end = (queryRunner: TypeOrmQueryRunner, committed: boolean) => {
    if (!queryRunner.isTransactionActive) ends.ended(queryRunner, committed);
  };
  dataSource.subscribers.push({
    afterTransactionCommit: ({ queryRunner }: { queryRunner: TypeOrmQueryRunner }) => end(queryRunner, true),
    afterTransactionRollback: ({ queryRunner }: { queryRunner: TypeOrmQueryRunner }) => end(queryRunner, false),
  });
}
