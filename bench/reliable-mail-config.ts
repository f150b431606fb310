// reliable-mail's ORM config and module options for the benchmark (kept apart so that other systems' worker
// processes do not load MikroORM and Nest).
import { Migrator } from '@mikro-orm/migrations';
import { defineConfig } from '@mikro-orm/postgresql';
import type { ReliableMailOptions } from '@reliable-mail/nestjs';
import { reliableMailMigrations } from '@reliable-mail/nestjs/mikro-orm';
import { FROM, MESSAGE_ID_DOMAIN, smtpTransport } from './common.js';

export function ormConfig(url: string, poolMax?: number) {
  return defineConfig({
    clientUrl: url,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    schemaGenerator: { ignoreSchema: ['reliable_mail'] },
    extensions: [Migrator],
    migrations: { migrationsList: reliableMailMigrations, snapshot: false, silent: true },
    allowGlobalContext: true,
    debug: false,
    ...(poolMax ? { pool: { max: poolMax } } : {}),
  });
}

/** The module options of the brief; the producer side runs the same options with the dispatcher off. */
export function reliableMailOptions(smtpPort: number, dispatcherEnabled: boolean): ReliableMailOptions {
  return {
    // Each lane has connections of its own, as many as its concurrency: 16 for the default lane the bench drains.
    transport: smtpTransport(smtpPort),
    from: FROM,
    messageIdDomain: MESSAGE_ID_DOMAIN,
    dispatcher: { enabled: dispatcherEnabled, concurrency: 16, batchSize: 64, pollIntervalMs: 1000 },
    lanes: { critical: { concurrency: 4 }, default: { concurrency: 16 }, bulk: { concurrency: 8 } },
  };
}
