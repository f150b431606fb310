import type pg from 'pg';
import { tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { SCHEMA_VERSIONS } from '../../libs/reliable-mail/src/schema/versions/index.js';

/** Every column, constraint and index of a schema, and its recorded versions: what two ways of migrating must share. */
export async function schemaCatalog(client: pg.ClientBase, schema: string): Promise<unknown> {
  const columns = await client.query(
    `select table_name, column_name, data_type, is_nullable, column_default from information_schema.columns
     where table_schema = $1 order by table_name, column_name`,
    [schema],
  );
  const constraints = await client.query(
    `select conrelid::regclass::text as table_name, conname, pg_get_constraintdef(oid) as definition
     from pg_constraint where connamespace = $1::regnamespace order by conname`,
    [schema],
  );
  const indexes = await client.query(
    `select indexname, indexdef from pg_indexes where schemaname = $1 order by indexname`,
    [schema],
  );
  const versions = await client.query(
    `select version, name, serves_code_from from ${tablesIn(schema).migrations} order by version`,
  );
  return { columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows, versions: versions.rows };
}

/** The newest version the earlier releases' MikroORM migrations made, before the schema recorded its versions. */
export const LAST_RELEASED_VERSION = 6;

/**
 * The tables as the earlier releases' MikroORM migrations left them, up to `version`: each version's statements in
 * `schema`, with no versions table and nothing recorded.
 */
export async function madeByEarlierReleases(client: pg.ClientBase, schema: string, version: number): Promise<void> {
  for (const step of SCHEMA_VERSIONS.slice(0, version)) {
    for (const statement of step.statements(tablesIn(schema))) await client.query(statement);
  }
}
