import type { EntityManager } from '@mikro-orm/postgresql';
import { CompiledQuery, type Kysely } from 'kysely';

/**
 * One SQL statement with `$n` placeholders. Values always travel as bound parameters, never spliced into the text.
 * A statement with a `name` is prepared once per connection by the clients that can keep it (the pool's).
 */
export interface Statement {
  readonly name?: string;
  readonly text: string;
}

/**
 * A caller's own bound on one statement, shorter than the client's: how long it may wait, from the call, for a
 * connection and the statement's answer together (a settle waits no longer than its lease). When it passes, the
 * call fails, and the connection, which may have gone silent, is not used again.
 */
export interface QueryBound {
  timeoutMs: number;
}

/** Where statements run: a caller's transaction (through its EntityManager) or reliable-mail's own connections. */
export interface SqlClient {
  /** `bound` is honoured by reliable-mail's own connections; a caller's transaction keeps the caller's timeouts. */
  query<R>(statement: Statement, values: readonly unknown[], bound?: QueryBound): Promise<R[]>;
}

/**
 * Runs statements through an EntityManager, inside its transaction when it has one: how an enqueue joins the
 * business transaction. Nothing is prepared, since the connection belongs to the caller.
 */
export function transactionOf(em: EntityManager): SqlClient {
  return { query: (statement, values) => statementsOn(em.getKysely()).query(statement, values) };
}

/** Runs statements on a Kysely instance: a transaction of its own, or the pool. */
export function statementsOn(kysely: Kysely<unknown>): SqlClient {
  return {
    async query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
      const result = await kysely.executeQuery<R>(CompiledQuery.raw(statement.text, [...values]));
      return result.rows;
    },
  };
}
