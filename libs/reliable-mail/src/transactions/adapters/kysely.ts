import type { Kysely } from 'kysely';
import { MailValidationError } from '../../errors.js';
import { isFunction, kyselyQuery, member, type TransactionAdapter } from '../caller-transaction.js';

/** Kysely's `Transaction` (from `db.transaction().execute(trx => …)` or `db.startTransaction()`), on PostgreSQL. */
export const kyselyAdapter: TransactionAdapter = {
  recognises: (tx) => isFunction(tx, 'executeQuery') && typeof member(tx, 'isTransaction') === 'boolean',
  open(tx) {
    if (!(tx as Kysely<unknown>).isTransaction) return null;
    // An app's plugins (CamelCasePlugin) would rename the columns of the rows read back: the statements go through
    // the same transaction without them. An object that gives no such Kysely back was not one after all.
    const withoutPlugins = member(tx, 'withoutPlugins');
    const bare: unknown = typeof withoutPlugins === 'function' ? (withoutPlugins as () => unknown).call(tx) : null;
    if (typeof bare !== 'object' || bare === null || !isFunction(bare, 'executeQuery')) {
      throw new MailValidationError('tx', "has Kysely's executeQuery but no withoutPlugins(): it is not a Kysely");
    }
    return { query: kyselyQuery(bare as Kysely<unknown>) };
  },
};
