import { CompiledQuery, type Kysely } from 'kysely';
import { sqlStateOf } from '../database/statement-refusal.js';
import { MailValidationError } from '../errors.js';
import type { SqlClient } from '../database/sql-client.js';
import type { OutboxTables } from '../schema/outbox-tables.js';

/**
 * A caller's transaction as the outbox uses it, whatever client it came from: statements run on the caller's
 * connection, inside the caller's transaction, and are committed or rolled back with the business data.
 */
export interface CallerTransaction {
  /**
   * Set where the client could not tell whether it is in a transaction (a pg client with a statement in flight, or
   * a pg older than 8.16): `inTransaction()` asks the server.
   */
  readonly mayBeOutside?: boolean;
  /**
   * Where the stack reports the transaction's end (MikroORM's and TypeORM's transaction events): the transaction's
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
  /** Whether `tx` is this client's object. Duck-typed: the client's package is never imported. */
  recognises(tx: object): boolean;
  /** The transaction `tx` is in; null when it is in none (a data source's own manager, a root client). */
  open(tx: object, ends: TransactionEnds): CallerTransaction | null;
}

const PROBE = 'reliable_mail_in_transaction';

/**
 * Whether the connection is inside a transaction, asked of the server where the client could not tell: a savepoint
 * can only be made inside one (25P01 outside, which changes nothing there).
 */
export async function inTransaction(transaction: CallerTransaction): Promise<boolean> {
  if (!transaction.mayBeOutside) return true;
  try {
    await transaction.query(`savepoint ${PROBE}`, []);
  } catch (error) {
    if (sqlStateOf(error) === '25P01') return false;
    throw error;
  }
  await transaction.query(`release savepoint ${PROBE}`, []);
  return true;
}

/** A property of an object the client gave, read without trusting its shape. */
export function member(target: object, name: string): unknown {
  return (target as Record<string, unknown>)[name];
}

export const isFunction = (target: object, name: string): boolean => typeof member(target, name) === 'function';

/**
 * The rows of a client's answer, at `field` of it (none: the answer itself). An object that looked like a known
 * client but answers otherwise is none after all: a typed error, not a TypeError at the first row.
 */
export function rowsOf<R>(answer: unknown, field?: string): R[] {
  const rows = field === undefined ? answer : (answer as Record<string, unknown> | null | undefined)?.[field];
  if (!Array.isArray(rows) || !rows.every((row) => typeof row === 'object' && row !== null)) {
    throw new MailValidationError(
      'tx',
      `answered a statement with no rows${field ? ` (no ${field})` : ''}: it is not the client it looked like`,
    );
  }
  return rows as R[];
}

/** Statements through a Kysely instance (Kysely's own transaction, or MikroORM's). */
export function kyselyQuery(kysely: Kysely<unknown>): CallerTransaction['query'] {
  return async <R>(text: string, values: readonly unknown[]) =>
    rowsOf<R>(await kysely.executeQuery<R>(CompiledQuery.raw(text, [...values])), 'rows');
}

/** A node-postgres client, or anything that answers as one. */
export interface PgQueryable {
  query<R>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
}

/** Statements through a pg client (the caller's own, or the one Drizzle's transaction holds). */
export function pgQuery(client: PgQueryable): CallerTransaction['query'] {
  return async <R>(text: string, values: readonly unknown[]) =>
    rowsOf<R>(await client.query<R>(text, [...values]), 'rows');
}

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
