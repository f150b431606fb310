import { tablesIn } from './outbox-tables.js';
import { versionStatements } from './schema-steps.js';
import { SCHEMA_VERSIONS, type SchemaVersion } from './versions/index.js';

/**
 * One version's SQL in a transaction of its own, for a migration tool that owns the app's DDL (Flyway, Prisma
 * Migrate, TypeORM migrations): what `npx reliable-mail migrate` runs, recorded alike, so that the start finds the
 * version it needs.
 */
export function renderVersionSql(schema: string, version: SchemaVersion): string {
  const statements = versionStatements(tablesIn(schema), version).map((statement) => `${statement};\n`);
  return `-- reliable-mail schema version ${version.version}: ${version.name}\nbegin;\n${statements.join('')}commit;\n`;
}

/** The SQL of every version after `from`. */
export function renderSchemaSql(schema: string, from = 0): string {
  return SCHEMA_VERSIONS.slice(from)
    .map((version) => renderVersionSql(schema, version))
    .join('\n');
}

/** The file each version is shipped as, in the package's sql/ folder (written for the default schema). */
export const schemaSqlFileName = (version: SchemaVersion): string =>
  `${String(version.version).padStart(4, '0')}-${version.name}.sql`;
