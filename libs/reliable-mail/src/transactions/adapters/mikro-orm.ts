import type { Kysely } from 'kysely';
import {
  isFunction,
  kyselyQuery,
  listensAlready,
  type TransactionAdapter,
  type TransactionEnds,
} from '../caller-transaction.js';

/** The part of MikroORM's `EventSubscriber` used here; MikroORM itself is not imported. */
interface TransactionEventSubscriber {
  afterTransactionCommit(args: { transaction?: unknown }): void;
  beforeTransactionRollback(args: { transaction?: unknown }): void;
}

interface MikroOrmEntityManager {
  isInTransaction(): boolean;
  getTransactionContext<T>(): T | undefined;
  getKysely(): Kysely<unknown>;
  getEventManager(): { registerSubscriber(subscriber: TransactionEventSubscriber): void };
}

/**
 * MikroORM's `EntityManager` (PostgreSQL): inside `em.transactional()` or `@Transactional()`, the injected one
 * resolves to the transaction's fork. Statements go through its Kysely instance, on the transaction's connection.
 */
export const mikroOrmAdapter: TransactionAdapter = {
  recognises: (tx) => isFunction(tx, 'getKysely') && isFunction(tx, 'isInTransaction'),
  open(tx, ends) {
    const em = tx as MikroOrmEntityManager;
    if (!em.isInTransaction()) return null;
    const context = em.getTransactionContext<object>();
    // A savepoint's release is not the commit: only a top-level transaction's end is reported, and only one that
    // began after reliable-mail listened (see listenForCommits); any other notifies in its statement.
    const topLevel = context && !('savepointName' in context) ? context : undefined;
    const reported = topLevel && listenForCommits(em, ends) ? topLevel : undefined;
    return { endReported: reported, query: kyselyQuery(em.getKysely()) };
  },
};

/**
 * Tells `ends` of each top-level transaction's commit and rollback, from the app's first transaction when called at
 * start. MikroORM reports a transaction's end to the subscribers it had when the transaction began: returns whether
 * it listened before this call.
 */
export function listenForCommits(em: MikroOrmEntityManager, ends: TransactionEnds): boolean {
  const events = em.getEventManager();
  return listensAlready(events, ends, () =>
    events.registerSubscriber({
      afterTransactionCommit: ({ transaction }) => ends.ended(transaction as object, true),
      // MikroORM announces a rollback before it sends it, and a rollback that fails (a killed connection) brings no
      // later event: the transaction ends here, whatever the path.
      beforeTransactionRollback: ({ transaction }) => ends.ended(transaction as object, false),
    }),
  );
}
