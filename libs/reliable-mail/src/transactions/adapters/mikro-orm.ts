import type { Kysely } from 'kysely';
import { isFunction, kyselyQuery, type TransactionAdapter, type TransactionEnds } from '../caller-transaction.js';

/** The part of MikroORM's `EventSubscriber` used here; MikroORM itself is not imported. */
interface TransactionEventSubscriber {
  afterTransactionCommit(args: { transaction?: unknown }): void;
  beforeTransactionRollback(args: { transaction?: unknown }): void;
}

interface MikroOrmEntityManager {
  isInTransaction(): boolean;
  getTransactionContext<T>(): T | undefined;
  getKysely(): Kysely<unknown>;
  getEventManager(): {
    registerSubscriber(subscriber: TransactionEventSubscriber): void;
    getSubscribers(): Set<unknown>;
  };
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

/** The subscriber that tells each `ends` of the transactions' ends: one object, whatever event managers hold it. */
const subscribers = new WeakMap<TransactionEnds, TransactionEventSubscriber>();

/**
 * Tells `ends` of each top-level transaction's commit and rollback, from the app's first transaction when called at
 * start. MikroORM runs a transaction on a fork whose event manager is a copy of the one it was forked from, made
 * with the subscribers it had then: a transaction's end is reported to those. Returns whether `em`'s event manager
 * had the subscriber before this call (the transaction's own copy has it when the app's had it at the fork).
 */
export function listenForCommits(em: MikroOrmEntityManager, ends: TransactionEnds): boolean {
  let subscriber = subscribers.get(ends);
  if (!subscriber) {
    subscriber = {
      afterTransactionCommit: ({ transaction }) => ends.ended(transaction as object, true),
      // MikroORM announces a rollback before it sends it, and a rollback that fails (a killed connection) brings no
      // later event: the transaction ends here, whatever the path.
      beforeTransactionRollback: ({ transaction }) => ends.ended(transaction as object, false),
    };
    subscribers.set(ends, subscriber);
  }
  const events = em.getEventManager();
  if (events.getSubscribers().has(subscriber)) return true;
  events.registerSubscriber(subscriber);
  return false;
}
