import { isFunction, member, type PgQueryable, pgQuery, type TransactionAdapter } from '../caller-transaction.js';

interface PgClient extends PgQueryable {
  /** Whether nothing is in flight: the transaction status is the server's latest answer. */
  readonly readyForQuery: boolean;
  /** From pg 8.16: 'I' idle, 'T' in a transaction, 'E' in a failed one. */
  getTransactionStatus?(): string | null;
}

/**
 * A node-postgres client (`pg.Client`, or a `PoolClient` from `pool.connect()`) on which the caller ran BEGIN: the
 * only way in for plain pg. Its transaction status is the protocol's, where pg exposes it and no statement (a BEGIN
 * not yet answered) is in flight; otherwise the server is asked when it matters.
 */
export const pgAdapter: TransactionAdapter = {
  // Anything else with a query() (a pool, TypeORM's data source, pg-promise) is no pg client and must not pass for
  // one: its statements would commit on a connection of their own.
  recognises: (tx) => isFunction(tx, 'query') && typeof member(tx, 'connectionParameters') === 'object',
  open(tx) {
    const client = tx as PgClient;
    const status = client.readyForQuery ? client.getTransactionStatus?.() : undefined;
    if (status === 'I') return null;
    return { mayBeOutside: status !== 'T' && status !== 'E', query: pgQuery(client) };
  },
};

export function isPgPool(tx: object): boolean {
  return typeof member(tx, 'totalCount') === 'number' && isFunction(tx, 'connect');
}
