import type { ModuleRef } from '@nestjs/core';
import { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import type { OutboxTables } from '../schema/outbox-tables.js';
import { DeadCheckouts } from './dead-checkouts.js';

/**
 * The tables `reliableMailEntities` describe, by their bare names, as MikroORM matches them: every table of
 * reliable-mail's, the versions table among them, since an installation the earlier releases made in the app's own
 * schema has them all there once migrated (and this code runs on none older). An app that registered the entities
 * of an earlier release one by one, rather than the list, lacks the newer ones, which its schema diff would drop.
 */
const ENTITY_TABLES = [
  'mail_outbox',
  'mail_outbox_attempt',
  'mail_outbox_event',
  'mail_outbox_feedback',
  'mail_suppression',
  'mail_console_audit',
  'mail_instance',
  'mail_template_source',
  'mail_send_quota',
  'mail_unsubscribe',
  'mail_relay_destination',
  'mail_relay',
  'mail_migrations',
];
/** Every table of reliable-mail's, for `schemaGenerator.skipTables`. */
const ALL_TABLES = ENTITY_TABLES;

/**
 * The app's MikroORM, where it has one: the ambient transaction of `em.transactional()` and `@Transactional()`, the
 * connection settings reliable-mail's own pool copies when `database.url` is not given, and what its schema diff
 * would do to reliable-mail's tables. Loaded only where `@mikro-orm/postgresql` is installed.
 */
export class AppOrm {
  private constructor(readonly em: EntityManager) {}

  static find(moduleRef: ModuleRef): AppOrm | null {
    try {
      return new AppOrm(moduleRef.get(EntityManager, { strict: false }));
    } catch {
      // Installed, but the app does not use MikroOrmModule.
      return null;
    }
  }

  /** The app's connection settings (host, credentials, ssl, …), for reliable-mail's own pool. */
  async connectionConfig(): Promise<pg.ClientConfig> {
    const connection = this.em.getConnection();
    try {
      const { options } = (await connection.getNativeClient()) as pg.Pool & { options: pg.PoolConfig };
      // Copied one by one: pg-pool keeps the password non-enumerable, and the ORM's type parsers are its own.
      const { types: _types, max: _max, min: _min, idleTimeoutMillis: _idle, ...rest } = options;
      return { ...rest, password: options.password };
    } catch {
      // An ORM configured with its own Kysely dialect exposes no pool: its plain settings are all there is.
      const { host, port, user, password, database } = connection.getConnectionOptions();
      return { host, port, user, password, database };
    }
  }

  /** Watches the app's pool for connections that die checked out (see DeadCheckouts); null where it has none. */
  async watchDeadCheckouts(): Promise<DeadCheckouts | null> {
    try {
      return new DeadCheckouts(await this.em.getConnection().getNativeClient());
    } catch {
      return null;
    }
  }

  /**
   * What in the ORM's configuration would let its schema diff (`schema:update`, `migration:create`) drop or copy
   * reliable-mail's tables, with the fix; null when nothing would. MikroORM 7 drops every table it has no entity
   * for, in every schema, unless told to skip them.
   */
  schemaDiffProblem(tables: OutboxTables): string | null {
    const config = this.em.config;
    const generator = config.get('schemaGenerator') ?? {};
    const skipped = (generator.skipTables ?? []).map(String);
    const skipsTables = ALL_TABLES.every((name) => skipped.includes(name));
    const registered = [...this.em.getMetadata().getAll().values()].filter((meta) =>
      ENTITY_TABLES.includes(meta.tableName),
    );
    const ormSchema = config.get('schema') ?? 'public';
    if (tables.schema === ormSchema) {
      const missing = ENTITY_TABLES.filter((name) => !registered.some((meta) => meta.tableName === name));
      if (missing.length === 0 || skipsTables) return null;
      if (registered.length > 0) {
        return (
          `reliable-mail's tables are in schema "${tables.schema}" beside the app's own, and the MikroORM config ` +
          `registers entities for some of them but not for ${missing.join(', ')}, which MikroORM's schema diff ` +
          `(schema:update, migration:create) would drop: register the whole reliableMailEntities list from ` +
          `'@reliable-mail/nestjs/mikro-orm' in the MikroORM config's entities`
        );
      }
      return (
        `reliable-mail's tables are in schema "${tables.schema}" beside the app's own, where MikroORM's schema diff ` +
        `(schema:update, migration:create) would drop them: add reliableMailEntities from ` +
        `'@reliable-mail/nestjs/mikro-orm' to the MikroORM config's entities`
      );
    }
    if (registered.length > 0) {
      return (
        `the MikroORM config registers reliable-mail's entities (${registered.map((meta) => meta.className).join(', ')}), ` +
        `which describe tables in schema "${ormSchema}", while reliable-mail's are in schema "${tables.schema}": ` +
        `MikroORM's schema diff would create copies of them; remove reliableMailEntities from its entities`
      );
    }
    if ((generator.ignoreSchema ?? []).includes(tables.schema) || skipsTables) return null;
    return (
      `MikroORM's schema diff (schema:update, migration:create) drops the tables of every schema it has no ` +
      `entities for, reliable-mail's among them: add schemaGenerator: { ignoreSchema: ['${tables.schema}'] } to ` +
      `the MikroORM config`
    );
  }
}
