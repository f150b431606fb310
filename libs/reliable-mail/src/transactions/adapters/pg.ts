import { isFunction, member, type TransactionAdapter } from '../caller-transaction.js';

interface PgQueryable {
  query<R>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
  /** From pg 8.16: 'I' idle, 'T' in a transaction, 'E' in a failed one. */
  getTransactionStatus?(): string | null;
}

/**
 * A node-postgres client (`pg.Client`, or a `PoolClient` from `pool.connect()`) on which the caller ran BEGIN: the
 * only way in for plain pg. Its transaction status is read from the protocol where pg exposes it; before that the
 * server is asked when it matters.
 */
export const pgAdapter: TransactionAdapter = {
  stack: 'pg',
  // A pool has query() too, but every query may take another connection: it is refused by the caller.
  recognises: (tx) => isFunction(tx, 'query') && !isPgPool(tx),
  open(tx) {
    const client = tx as PgQueryable;
    const status = client.getTransactionStatus?.();
    if (status === 'I') return null;
    return {
      stack: 'pg',
      mayBeOutside: status !== 'T' && status !== 'E',
      async query<R>(text: string, values: readonly unknown[]) {
        return (await client.query<R>(text, [...values])).rows;
      },
    };
  },
};

export function isPgPool(tx: object): boolean {
  return typeof member(tx, 'totalCount') === 'number' && isFunction(tx, 'connect');
}
