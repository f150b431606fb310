import { CompiledQuery, type Kysely } from 'kysely';
import { isFunction, member, type TransactionAdapter } from '../caller-transaction.js';

/** Kysely's `Transaction` (from `db.transaction().execute(trx => …)`), on any PostgreSQL dialect. */
export const kyselyAdapter: TransactionAdapter = {
  stack: 'Kysely',
  recognises: (tx) => isFunction(tx, 'executeQuery') && typeof member(tx, 'isTransaction') === 'boolean',
  open(tx) {
    if (!(tx as Kysely<unknown>).isTransaction) return null;
    // An app's plugins (CamelCasePlugin) would rename the columns of the rows read back.
    const kysely = (tx as Kysely<unknown>).withoutPlugins();
    return {
      stack: 'Kysely',
      async query<R>(text: string, values: readonly unknown[]) {
        return (await kysely.executeQuery<R>(CompiledQuery.raw(text, [...values]))).rows;
      },
    };
  },
};
