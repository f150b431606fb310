import type { Kysely } from 'kysely';
import { isFunction, kyselyQuery, member, type TransactionAdapter } from '../caller-transaction.js';

/** Kysely's `Transaction` (from `db.transaction().execute(trx => …)` or `db.startTransaction()`), on PostgreSQL. */
export const kyselyAdapter: TransactionAdapter = {
  recognises: (tx) => isFunction(tx, 'executeQuery') && typeof member(tx, 'isTransaction') === 'boolean',
  open(tx) {
    if (!(tx as Kysely<unknown>).isTransaction) return null;
    // An app's plugins (CamelCasePlugin) would rename the columns of the rows read back.
    return { query: kyselyQuery((tx as Kysely<unknown>).withoutPlugins()) };
  },
};
