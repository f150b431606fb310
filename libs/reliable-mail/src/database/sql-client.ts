import type pg from 'pg';
import type { OutboxTables } from '../schema/outbox-tables.js';

/**
 * One statement as it runs: `$n` placeholders, values always bound, never spliced into the text. A statement with
 * a `name` is prepared once per connection by the clients that can keep it (the pool's).
 */
export interface StatementText {
  readonly name?: string;
  readonly text: string;
}

/**
 * One SQL statement over reliable-mail's tables. Its text names them qualified by the schema they are in, so that
 * it runs alike on reliable-mail's own connections and on a caller's, whatever that connection's `search_path`;
 * it is made once for each schema.
 */
export class Statement {
  private readonly made = new Map<string, StatementText>();

  constructor(private readonly make: (tables: OutboxTables) => StatementText) {}

  in(tables: OutboxTables): StatementText {
    let text = this.made.get(tables.schema);
    if (!text) {
      text = this.make(tables);
      this.made.set(tables.schema, text);
    }
    return text;
  }
}

/**
 * A caller's own bound on one statement, shorter than the client's: how long it may wait, from the call, for a
 * connection and the statement's answer together (a settle waits no longer than its lease). When it passes, the
 * call fails, and the connection, which may have gone silent, is not used again.
 */
export interface QueryBound {
  timeoutMs: number;
}

/** Where statements run: a caller's transaction, or reliable-mail's own connections; each knows the tables' schema. */
export interface SqlClient {
  /** `bound` is honoured by reliable-mail's own connections; a caller's transaction keeps the caller's timeouts. */
  query<R>(statement: Statement, values: readonly unknown[], bound?: QueryBound): Promise<R[]>;
}

/** Statements over the tables in `tables`, on one pg connection (a transaction's, the CLI's), unprepared. */
export function statementsOnClient(client: pg.ClientBase, tables: OutboxTables): SqlClient {
  return {
    query: async <R>(statement: Statement, values: readonly unknown[]) =>
      (await client.query<R & pg.QueryResultRow>(statement.in(tables).text, [...values])).rows,
  };
}
