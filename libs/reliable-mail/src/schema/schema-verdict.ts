import type { SchemaState } from './schema-state.js';
import { KNOWN_SCHEMA_VERSION, NEEDED_SCHEMA_VERSION } from './schema-steps.js';

export const MIGRATE_COMMAND = 'npx reliable-mail migrate';

/**
 * Whether this code can run on the schema as it is, and if not, what fixes it: the start refuses only a schema
 * older than the code needs, or one that no longer serves code as old as this. Null when it can run.
 */
export function schemaProblem(state: SchemaState, packageVersion: string): string | null {
  const where = `schema "${state.tables.schema}"`;
  const upgrade =
    `run \`${MIGRATE_COMMAND}\` (it reads DATABASE_URL), apply the SQL files in node_modules/@reliable-mail/nestjs/sql ` +
    `with the app's own migration tool, or set database.migrateAtStart: true`;
  if (state.version === 0) {
    return `reliable-mail's tables are not in the database (${where}): ${upgrade}`;
  }
  if (state.version < NEEDED_SCHEMA_VERSION) {
    return `reliable-mail's schema (${where}) is at version ${state.version}, and this code needs version ${NEEDED_SCHEMA_VERSION}: ${upgrade}`;
  }
  if (state.servesCodeFrom > KNOWN_SCHEMA_VERSION) {
    return (
      `reliable-mail's schema (${where}) is at version ${state.version}, which serves only code that knows version ` +
      `${state.servesCodeFrom} or later; @reliable-mail/nestjs ${packageVersion} knows versions up to ${KNOWN_SCHEMA_VERSION}: ` +
      `deploy a newer version of the package`
    );
  }
  return null;
}
