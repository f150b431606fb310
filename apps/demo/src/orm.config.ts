import { Migrator } from '@mikro-orm/migrations';
import { defineConfig } from '@mikro-orm/postgresql';
import { reliableMailEntities, reliableMailMigrations } from '@reliable-mail/nestjs';
import { demoMigrations } from './migrations/index.js';
import { Order } from './orders/order.entity.js';

/** MikroORM for the demo: reliable-mail's entities and migrations, then the shop's own. */
export function demoOrmConfig(databaseUrl: string) {
  return defineConfig({
    clientUrl: databaseUrl,
    entities: [...reliableMailEntities, Order],
    extensions: [Migrator],
    migrations: {
      migrationsList: [...reliableMailMigrations, ...demoMigrations],
      snapshot: false,
      silent: true,
    },
    debug: false,
  });
}
