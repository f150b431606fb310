import type pg from 'pg';
import { sqlStateOf } from '../database/statement-refusal.js';
import { type SchemaSession } from './schema-session.js';
import { readSchemaState, type SchemaState } from './schema-state.js';
import { KNOWN_SCHEMA_VERSION, nextStep } from './schema-steps.js';

/**
 * Serialises migrations of one database: instances that migrate at start, or a CLI run beside them, take it in
 * turn, and each reads the version again once it holds it. A transaction's lock, released by its commit, as a
 * connection pooler in transaction mode keeps no session's. Waiting for it, and a version's DDL (an index on a large
 * outbox), may take longer than the connection's statement_timeout (the start's is reliable-mail's 30 s).
 */
const MIGRATION_LOCK = [
  'set local statement_timeout = 0',
  'set local lock_timeout = 0',
  `select pg_advisory_xact_lock(hashtext('reliable-mail schema migration'))`,
];

/**
 * How long a version's DDL waits for the lock on a table: meanwhile every statement on that table queues behind it,
 * the outbox's traffic included, so a long transaction holding it would stall the app. Past it, the version is
 * rolled back and tried again, up to LOCK_TRIES times.
 */
export const DDL_LOCK_TIMEOUT = `set local lock_timeout = '5s'`;
export const LOCK_TRIES = 6;
export const LOCK_NOT_AVAILABLE = '55P03';

/** A connection on which the migration opens a transaction per version. */
export interface MigrationConnection extends SchemaSession {
  transaction<T>(work: (session: SchemaSession) => Promise<T>): Promise<T>;
}

export interface MigrationResult {
  readonly schema: string;
  readonly from: number;
  readonly to: number;
}

/**
 * Brings reliable-mail's schema to the newest version this code knows, one version per transaction, under the
 * migration lock. Running it again, or on many instances at once, changes nothing more.
 */
export async function migrateSchema(connection: MigrationConnection, schema?: string): Promise<MigrationResult> {
  let first: SchemaState | undefined;
  for (let lockTries = 1; ;) {
    let state: SchemaState;
    try {
      state = await connection.transaction(async (session) => {
        for (const statement of MIGRATION_LOCK) await session.run(statement);
        const current = await readSchemaState(session, schema);
        const step = nextStep(current);
        if (step) await session.run(DDL_LOCK_TIMEOUT);
        for (const statement of step ?? []) await session.run(statement);
        return current;
      });
    } catch (error) {
      if (sqlStateOf(error) !== LOCK_NOT_AVAILABLE || lockTries++ >= LOCK_TRIES) throw error;
      continue;
    }
    first ??= state;
    if (state.version >= KNOWN_SCHEMA_VERSION) {
      return { schema: state.tables.schema, from: first.version, to: state.version };
    }
    // The schema the first step chose (a recognised installation's own) is where the rest go.
    schema = state.tables.schema;
  }
}

/**
 * Brings the schema to `version` within a transaction someone else holds: a MikroORM migration's. A version already
 * there (applied by the CLI, or recognised) is recorded if need be and not run again.
 */
export async function migrateSchemaTo(session: SchemaSession, version: number, schema?: string): Promise<void> {
  for (const statement of MIGRATION_LOCK) await session.run(statement);
  for (;;) {
    const state = await readSchemaState(session, schema);
    const step = nextStep(state, version);
    if (!step) return;
    for (const statement of step) await session.run(statement);
  }
}

/** A pg connection as the migration uses it: a transaction per version (the CLI's, the start's). */
export function migrationConnection(client: pg.Client): MigrationConnection {
  const run = async <R>(sql: string) => (await client.query(sql)).rows as R[];
  return {
    run,
    async transaction(work) {
      await client.query('begin');
      try {
        const result = await work({ run });
        await client.query('commit');
        return result;
      } catch (error) {
        await client.query('rollback').catch(() => undefined);
        throw error;
      }
    },
  };
}
