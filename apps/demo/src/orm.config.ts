import { Migrator } from '@mikro-orm/migrations';
import { defineConfig } from '@mikro-orm/postgresql';
import { reliableMailMigrations } from '@reliable-mail/nestjs/mikro-orm';
import { demoMigrations } from './migrations/index.js';
import { Order } from './orders/order.entity.js';

/**
 * MikroORM for the demo: reliable-mail's migrations, then the shop's own. reliable-mail's tables are in a schema of
 * their own, which the schema diff is told to leave alone.
 */
export function demoOrmConfig(databaseUrl: string) {
  return defineConfig({
    clientUrl: databaseUrl,
    entities: [Order],
    schemaGenerator: { ignoreSchema: ['reliable_mail'] },
    extensions: [Migrator],
    migrations: {
      migrationsList: [...reliableMailMigrations, ...demoMigrations],
      snapshot: false,
      silent: true,
    },
    debug: false,
  });
}
