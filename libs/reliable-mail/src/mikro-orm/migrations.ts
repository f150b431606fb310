import { Migration } from '@mikro-orm/migrations';
import { migrateSchemaTo } from '../schema/migrate-schema.js';
import { DEFAULT_SCHEMA, tablesIn } from '../schema/outbox-tables.js';
import { SCHEMA_VERSIONS } from '../schema/versions/index.js';

/** A migration class, as `migrations.migrationsList` takes it. */
type MigrationClass = new (...args: ConstructorParameters<typeof Migration>) => Migration;

/**
 * A MikroORM migration that brings reliable-mail's schema to one version: the same statements `npx reliable-mail
 * migrate` runs, in the migration's transaction. A version the schema already has (the CLI applied it, or the
 * tables were recognised) is not run again.
 */
function schemaVersionMigration(version: number, schema: string | undefined): MigrationClass {
  return class ReliableMailSchemaVersion extends Migration {
    override async up(): Promise<void> {
      await migrateSchemaTo({ run: async (sql) => (await this.execute(sql)) as never[] }, version, schema);
    }

    override down(): void {
      throw new Error(
        "reliable-mail's schema versions are not rolled back: each serves the code before it, so a rollback of the " +
          `code keeps working on them. To remove reliable-mail, drop its schema (${schema ?? DEFAULT_SCHEMA}).`,
      );
    }
  };
}

/** The names the earlier releases' MikroORM migrations had, for the versions they made. */
const RELEASED_NAMES = [
  'Migration20261130000000_reliable-mail_create-outbox',
  'Migration20261130120000_reliable-mail_lighter-rows',
  'Migration20261201000000_reliable-mail_recipient-state',
  'Migration20261202000000_reliable-mail_provider-ids',
  'Migration20261203000000_reliable-mail_feedback',
  'Migration20261204000000_reliable-mail_request-message-ids',
];

/**
 * reliable-mail's schema as MikroORM migrations, for apps whose MikroORM migrator owns their DDL, with its tables in
 * `schema` (`database.schema`): add them to the app's `migrations.migrationsList`. The first versions keep the
 * names of the earlier releases' migrations, so that an installation that ran those runs nothing again.
 */
export function reliableMailMigrationsInSchema(schema: string): { name: string; class: MigrationClass }[] {
  return migrationsIn(tablesIn(schema).schema);
}

/** The same in reliable-mail's own schema, or where the earlier releases made its tables (see readSchemaState). */
export const reliableMailMigrations = migrationsIn(undefined);

function migrationsIn(schema: string | undefined): { name: string; class: MigrationClass }[] {
  return SCHEMA_VERSIONS.map(({ version, name }) => ({
    name: RELEASED_NAMES[version - 1] ?? `reliable-mail_${String(version).padStart(4, '0')}_${name}`,
    class: schemaVersionMigration(version, schema),
  }));
}
