import type { OutboxTables } from './outbox-tables.js';
import { literal } from './schema-session.js';
import type { SchemaState } from './schema-state.js';
import { SCHEMA_VERSIONS, type SchemaVersion } from './versions/index.js';

/** The newest version this code knows. */
export const KNOWN_SCHEMA_VERSION = SCHEMA_VERSIONS.length;

/**
 * The oldest version this code runs on: the newest whose tables or columns it reads or writes. A version the code
 * does not rely on (an index, say) leaves it where it is, so that an installation need not migrate before a deploy.
 */
export const NEEDED_SCHEMA_VERSION = 14;

/**
 * The schema, made by the first version where it does not exist yet. `create schema if not exists` would need the
 * right to create schemas in the database even where it exists: a role granted only its own schema could not run it.
 */
const createSchema = (t: OutboxTables): string =>
  `do $$
  begin
    if not exists (select 1 from pg_namespace where nspname = ${literal(t.schema)}) then
      create schema ${t.schema};
    end if;
  end $$`;

/**
 * The versions table, created with the first version (or when recognised tables are first migrated, in their own
 * schema): one row for each version, and the oldest code each serves.
 */
const versionsTable = (t: OutboxTables): string[] => [
  `create table if not exists ${t.migrations} (
    "version" int primary key,
    "name" text not null,
    "serves_code_from" int not null,
    "applied_at" timestamptz not null default now()
  )`,
];

/**
 * The record of a version, serving code from no older a version than the newest record did: converting to the
 * partitioned layout raises it (see partitioned-layout.ts), and a later version must not let older code back in.
 */
const recordVersion = (t: OutboxTables, version: SchemaVersion, name = version.name): string =>
  `insert into ${t.migrations} ("version", "name", "serves_code_from")
   select ${version.version}, ${literal(name)}, greatest(${version.servesCodeFrom}, coalesce(max("serves_code_from"), 1))
   from ${t.migrations}`;

/** The statements of one version, with its record: what one transaction runs to bring the schema to it. */
export function versionStatements(t: OutboxTables, version: SchemaVersion): string[] {
  const first = version.version === 1 ? [createSchema(t), ...versionsTable(t)] : [];
  return [...first, ...version.statements(t), recordVersion(t, version)];
}

/**
 * The statements that record the versions of tables recognised from the catalog, as their MikroORM migrations left
 * them: nothing of the tables themselves is run again.
 */
export function recognitionStatements(state: SchemaState): string[] {
  return [
    ...versionsTable(state.tables),
    ...SCHEMA_VERSIONS.slice(0, state.version).map((version) =>
      recordVersion(state.tables, version, `${version.name} (recognised: made by reliableMailMigrations)`),
    ),
  ];
}

/** What brings the schema from `state` one version on: the next step of a migration, or null when it is current. */
export function nextStep(state: SchemaState, target = KNOWN_SCHEMA_VERSION): string[] | null {
  if (state.version >= target) return null;
  const next = SCHEMA_VERSIONS[state.version];
  return [
    ...(state.source === 'recognised' ? recognitionStatements(state) : []),
    ...versionStatements(state.tables, next),
  ];
}
