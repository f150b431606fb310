import type { SqlClient } from '../database/sql-client.js';
import type { OutboxTables } from '../schema/outbox-tables.js';

/**
 * A caller's transaction as the outbox uses it, whatever client it came from: statements run on the caller's
 * connection, inside the caller's transaction, and are committed or rolled back with the business data.
 */
export interface CallerTransaction {
  /** Which client the transaction came from, for messages. */
  readonly stack: string;
  /**
   * Set where the client keeps no transaction state (a plain pg client, after the caller's own BEGIN or not): it
   * may be outside one, which `inTransaction()` asks the server.
   */
  readonly mayBeOutside?: boolean;
  /**
   * Where the stack reports the transaction's end (MikroORM's and TypeORM's commit events): the transaction's
   * identity, which `TransactionEnds` is told of when it commits or rolls back. Absent where it does not, or for a
   * savepoint, whose release is not the commit.
   */
  readonly endReported?: object;
  query<R>(text: string, values: readonly unknown[]): Promise<R[]>;
}

/** Told when a transaction with a reported end commits or rolls back (the wake-up after the commit). */
export interface TransactionEnds {
  ended(transaction: object, committed: boolean): void;
}

/** One client reliable-mail can write through: how to recognise its transaction object and how to use it. */
export interface TransactionAdapter {
  readonly stack: string;
  /** Whether `tx` is this client's object. Duck-typed: the client's package is never imported. */
  recognises(tx: object): boolean;
  /** The transaction `tx` is in; null when it is in none (a data source's own manager, a root client). */
  open(tx: object, ends: TransactionEnds): CallerTransaction | null;
}

/**
 * Whether the connection is inside a transaction, asked of the server: within an explicit transaction a statement
 * starts after the transaction did (after its BEGIN), while a statement outside one is the first of its own.
 */
export async function inTransaction(transaction: CallerTransaction): Promise<boolean> {
  if (!transaction.mayBeOutside) return true;
  const [row] = await transaction.query<{ open: boolean }>(
    'select transaction_timestamp() < statement_timestamp() as open',
    [],
  );
  return row.open;
}

/** A property of an object the client gave, read without trusting its shape. */
export function member(target: object, name: string): unknown {
  return (target as Record<string, unknown>)[name];
}

export const isFunction = (target: object, name: string): boolean => typeof member(target, name) === 'function';

/**
 * Statements over reliable-mail's tables in a caller's transaction. Nothing is prepared: the connection is the
 * caller's. A date goes as ISO text with its offset: Prisma sends a Date as a time without one, which PostgreSQL
 * reads in the session's time zone.
 */
export function statementsIn(transaction: CallerTransaction, tables: OutboxTables): SqlClient {
  return {
    query: (statement, values) =>
      transaction.query(
        statement.in(tables).text,
        values.map((value) => (value instanceof Date ? value.toISOString() : value)),
      ),
  };
}
