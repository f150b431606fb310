import { MailValidationError } from '../../errors.js';
import { type PgQueryable, pgQuery, type TransactionAdapter } from '../caller-transaction.js';

const ENTITY_KIND = Symbol.for('drizzle:entityKind');

/**
 * Drizzle's transaction on node-postgres (`db.transaction(async (tx) => …)`). Drizzle runs no text with values but
 * through its own `sql` builder, so statements go to the pg client the transaction holds (`tx._.session.client`):
 * plain pg, with pg's own types, on the transaction's connection.
 */
export const drizzleAdapter: TransactionAdapter = {
  recognises: (tx) => typeof kindOf(tx) === 'string',
  open(tx) {
    const kind = kindOf(tx);
    if (kind === 'NodePgDatabase') return null;
    if (kind !== 'NodePgTransaction') {
      throw new MailValidationError(
        'tx',
        `is Drizzle's ${String(kind)}: reliable-mail writes through the transactions of a drizzle-orm/node-postgres database`,
      );
    }
    const client = (tx as { _?: { session?: { client?: PgQueryable } } })._?.session?.client;
    if (typeof client?.query !== 'function') {
      throw new MailValidationError(
        'tx',
        'is a Drizzle transaction whose pg client is not at tx._.session.client (as in 0.45): pass the pg client instead',
      );
    }
    return { query: pgQuery(client) };
  },
};

function kindOf(tx: object): unknown {
  return (tx as { constructor?: Record<symbol, unknown> }).constructor?.[ENTITY_KIND];
}
