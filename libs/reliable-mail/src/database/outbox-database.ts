import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Pool, QueryResultRow } from 'pg';
import type { SqlClient, Statement } from './sql-client.js';

/**
 * The connections reliable-mail's own work runs on (the dispatcher, the event publisher, retention, health and
 * metrics), apart from any caller's transaction. Statements with a name are prepared once per connection instead
 * of being planned at every claim and settle.
 */
@Injectable()
export class OutboxDatabase implements SqlClient {
  constructor(private readonly em: EntityManager) {}

  async query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
    const pool = await this.pool();
    const result = await pool.query<R & QueryResultRow>({
      name: statement.name,
      text: statement.text,
      values: [...values],
    });
    return result.rows;
  }

  /** The pool itself, for the one connection that LISTENs. */
  async pool(): Promise<Pool> {
    return this.em.getConnection().getNativeClient();
  }
}
