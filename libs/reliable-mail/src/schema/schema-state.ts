import { DEFAULT_SCHEMA, type OutboxTables, tablesIn } from './outbox-tables.js';
import { ReliableMailSetupError } from '../errors.js';
import { literal, type SchemaSession } from './schema-session.js';

/** What the database holds of reliable-mail's schema. */
export interface SchemaState {
  readonly tables: OutboxTables;
  /** The version the tables are at; 0 when there are none. */
  readonly version: number;
  /** The oldest code, as the newest version it knows, that the tables serve. */
  readonly servesCodeFrom: number;
  /**
   * `recorded`: the versions table says so. `recognised`: tables that reliable-mail's MikroORM migrations made before
   * the schema kept its versions, their version read from the catalog. `none`: no tables.
   */
  readonly source: 'recorded' | 'recognised' | 'none';
}

/**
 * The catalog facts each version before the versions table left, newest last: the version of an installation made
 * by the MikroORM migrations is the last fact of an unbroken run from the first.
 */
const RECOGNISED_VERSIONS = (t: OutboxTables): string[] => {
  const column = (table: string, name: string) =>
    `exists (select 1 from pg_attribute where attrelid = ${literal(table)}::regclass and attname = ${literal(name)} and not attisdropped)`;
  return [
    'true',
    `(select not attnotnull from pg_attribute where attrelid = ${literal(t.outbox)}::regclass and attname = 'content_hash')`,
    column(t.outbox, 'accepted_recipients'),
    column(t.outbox, 'provider_request_id'),
    `to_regclass(${literal(t.feedback)}) is not null`,
    column(t.outbox, 'provider_message_ids'),
  ];
};

interface Presence {
  schema: string;
  recorded: boolean;
  tables: boolean;
}

/**
 * Reads the state of the schema named, or, with none named, of `reliable_mail`, unless only the connection's
 * current schema (`public`, usually) holds reliable-mail's tables: where the MikroORM migrations made them before
 * reliable-mail had a schema of its own. There they stay, recognised, with nothing run again. Both holding them is
 * refused: the app would send from one and strand the other's pending mail.
 */
export async function readSchemaState(session: SchemaSession, schema?: string): Promise<SchemaState> {
  const own = schema === undefined ? DEFAULT_SCHEMA : tablesIn(schema).schema;
  const current = schema === undefined ? 'current_schema()' : 'null';
  const [ownPresence, currentPresence] = await session.run<Presence>(
    `select s.schema, to_regclass(s.schema || '.mail_migrations') is not null as recorded,
            to_regclass(s.schema || '.mail_outbox') is not null as tables
     from (select ${literal(own)} as schema, 1 as rank union all select ${current}, 2) s order by s.rank`,
  );
  const ownFound = ownPresence.recorded || ownPresence.tables;
  // Another schema counts only with the outbox itself: an app's own table named mail_migrations is not ours.
  const earlier = currentPresence?.schema && currentPresence.schema !== own && currentPresence.tables;
  if (ownFound && earlier) {
    throw new ReliableMailSetupError(
      `reliable-mail's tables are in two schemas, "${own}" and "${currentPresence.schema}" (where earlier releases ` +
        `made them): set database.schema (--schema) to the one to keep, and move the other's pending mail into it ` +
        `or drop it`,
    );
  }
  const found = ownFound ? ownPresence : earlier ? currentPresence : null;
  if (!found) return { tables: tablesIn(own), version: 0, servesCodeFrom: 0, source: 'none' };
  const tables = tablesIn(found.schema);
  if (found.recorded) {
    const [newest] = await session.run<{ version: number; serves_code_from: number }>(
      `select version, serves_code_from from ${tables.migrations} order by version desc limit 1`,
    );
    if (newest) return { tables, version: newest.version, servesCodeFrom: newest.serves_code_from, source: 'recorded' };
  }
  const facts = RECOGNISED_VERSIONS(tables);
  const [row] = await session.run<Record<string, boolean>>(
    `select ${facts.map((fact, index) => `${fact} as v${index + 1}`).join(', ')}`,
  );
  const version = facts.findIndex((_fact, index) => !row[`v${index + 1}`]);
  return { tables, version: version === -1 ? facts.length : version, servesCodeFrom: 1, source: 'recognised' };
}
