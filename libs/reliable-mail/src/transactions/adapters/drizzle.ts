import { MailValidationError } from '../../errors.js';
import { member, type TransactionAdapter } from '../caller-transaction.js';

const ENTITY_KIND = Symbol.for('drizzle:entityKind');

interface PgClient {
  query<R>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
}

/**
 * Drizzle's transaction on node-postgres (`db.transaction(async (tx) => …)`). Drizzle runs no text with values but
 * through its own `sql` builder, so statements go to the pg client the transaction holds (`tx._.session.client`):
 * plain pg, with pg's own types, on the transaction's connection.
 */
export const drizzleAdapter: TransactionAdapter = {
  stack: 'Drizzle',
  recognises: (tx) => typeof kindOf(tx) === 'string',
  open(tx) {
    const kind = kindOf(tx);
    if (kind !== 'NodePgTransaction') {
      if (kind === 'NodePgDatabase') return null;
      throw new MailValidationError(
        'tx',
        `reliable-mail writes through Drizzle's node-postgres transactions, not ${String(kind)}: pass the transaction of a drizzle-orm/node-postgres database`,
      );
    }
    const internals = member(tx, '_') as { session?: { client?: PgClient } } | undefined;
    const client = internals?.session?.client;
    if (typeof client?.query !== 'function') {
      throw new MailValidationError(
        'tx',
        "this drizzle-orm keeps its transaction's pg client elsewhere than tx._.session.client (tested with 0.45): pass the pg client instead",
      );
    }
    return {
      stack: 'Drizzle',
      async query<R>(text: string, values: readonly unknown[]) {
        return (await client.query<R>(text, [...values])).rows;
      },
    };
  },
};

function kindOf(tx: object): unknown {
  const constructor = (tx as { constructor?: Record<symbol, unknown> }).constructor;
  return constructor?.[ENTITY_KIND];
}
