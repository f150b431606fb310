import { CompiledQuery, type Kysely } from 'kysely';
import { isFunction, type TransactionAdapter, type TransactionEnds } from '../caller-transaction.js';

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

/** The event managers reliable-mail listens to for commits: one per ORM, shared by its forks. */
const subscribed = new WeakMap<object, TransactionEnds>();

/**
 * MikroORM's `EntityManager` (PostgreSQL): inside `em.transactional()` or `@Transactional()`, the injected one
 * resolves to the transaction's fork. Statements go through its Kysely instance, on the transaction's connection.
 */
export const mikroOrmAdapter: TransactionAdapter = {
  stack: 'MikroORM',
  recognises: (tx) => isFunction(tx, 'getKysely') && isFunction(tx, 'isInTransaction'),
  open(tx, ends) {
    const em = tx as MikroOrmEntityManager;
    if (!em.isInTransaction()) return null;
    const context = em.getTransactionContext<object>();
    // A savepoint's release is not the commit: only a top-level transaction's end is reported.
    const topLevel = context && !('savepointName' in context) ? context : undefined;
    if (topLevel) listenForCommits(em, ends);
    const kysely = em.getKysely();
    return {
      stack: 'MikroORM',
      endReported: topLevel,
      async query<R>(text: string, values: readonly unknown[]) {
        return (await kysely.executeQuery<R>(CompiledQuery.raw(text, [...values]))).rows;
      },
    };
  },
};

/**
 * Tells `ends` of each top-level transaction's commit and rollback. Before the app's first transaction: MikroORM
 * reports a transaction's end to the subscribers it had when the transaction began.
 */
export function listenForCommits(em: MikroOrmEntityManager, ends: TransactionEnds): void {
  const events = em.getEventManager();
  if (subscribed.get(events) === ends) return;
  subscribed.set(events, ends);
  events.registerSubscriber({
    afterTransactionCommit: ({ transaction }) => ends.ended(transaction as object, true),
    // MikroORM announces a rollback before it sends it, and a rollback that fails (a killed connection) brings no
    // later event: the transaction ends here, whatever the path.
    beforeTransactionRollback: ({ transaction }) => ends.ended(transaction as object, false),
  });
}
