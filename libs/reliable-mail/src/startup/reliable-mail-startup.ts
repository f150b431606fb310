import { Inject, Injectable, Logger, type OnModuleInit, Optional } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { OutboxDatabase } from '../database/outbox-database.js';
import { ReliableMailSetupError } from '../errors.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { migrateSchema, migrationConnection } from '../schema/migrate-schema.js';
import { OutboxSchema } from '../schema/outbox-schema.js';
import type { OutboxTables } from '../schema/outbox-tables.js';
import { readSchemaState } from '../schema/schema-state.js';
import { schemaProblem } from '../schema/schema-verdict.js';
import { WakeUpNotifier } from '../outbox/wake-up.notifier.js';
import { StoredTemplateVersions } from '../templates/stored-template-versions.js';
import { listenForCommits } from '../transactions/adapters/mikro-orm.js';
import { CallerTransactions } from '../transactions/caller-transactions.js';
import { statementsOnClient } from '../database/sql-client.js';
import { findAppStack } from './app-stack.js';
import { openStartConnection } from './start-connection.js';
import { PACKAGE_VERSION } from './package-version.js';

/**
 * The start: what the app gave reliable-mail is checked before anything is sent or enqueued, and a wrong setup fails
 * `app.init()` with the fix in its message: EventEmitterModule missing, no database to connect to, the schema
 * missing or of the wrong version (or migrated here, with `database.migrateAtStart`), an ORM whose schema diff would
 * drop reliable-mail's tables. Then the sources of the templates from files are saved. Until it is done, every statement
 * waits (an enqueue too, so a row never names a version whose sources are not kept); after a failed start, each fails
 * with its error.
 */
@Injectable()
export class ReliableMailStartup implements OnModuleInit {
  private readonly logger = new Logger('ReliableMail');

  constructor(
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    private readonly moduleRef: ModuleRef,
    private readonly database: OutboxDatabase,
    private readonly schema: OutboxSchema,
    private readonly transactions: CallerTransactions,
    private readonly wakeUp: WakeUpNotifier,
    private readonly templateVersions: StoredTemplateVersions,
    @Optional() @Inject(EventEmitter2) private readonly emitter?: EventEmitter2,
  ) {
    schema.startsWith(() => this.start());
  }

  async onModuleInit(): Promise<void> {
    await this.schema.tables();
  }

  private async start(): Promise<OutboxTables> {
    if (!this.emitter) {
      throw new ReliableMailSetupError(
        "ReliableMailModule needs EventEmitterModule.forRoot() (from @nestjs/event-emitter) among the app module's " +
          'imports: its events reach the app through it',
      );
    }
    const { appOrm, ambient } = await findAppStack(this.moduleRef);
    this.transactions.useAmbient(ambient);
    // From the app's first transaction on: MikroORM tells the subscribers it had when a transaction began.
    if (appOrm) listenForCommits(appOrm.em, this.wakeUp);
    const { url, schema, migrateAtStart, startTimeoutMs } = this.options.database;
    if (!url && !appOrm) {
      throw new ReliableMailSetupError(
        'ReliableMailModule needs database.url (a postgres:// URL) in an app without MikroORM: its own ' +
          'connections (dispatcher, health, events) go there',
      );
    }
    const connection = url ? { connectionString: url } : await appOrm!.connectionConfig();
    this.database.connectTo(connection, (await appOrm?.watchDeadCheckouts()) ?? null);
    const client = await openStartConnection(() => this.database.client(), connection, startTimeoutMs, this.logger);
    try {
      if (migrateAtStart) {
        const migrated = await migrateSchema(migrationConnection(client), schema ?? undefined);
        if (migrated.to > migrated.from) this.logger.log({ msg: 'migrated the schema', ...migrated });
      }
      const state = await readSchemaState(migrationConnection(client), schema ?? undefined);
      const problem = schemaProblem(state, PACKAGE_VERSION) ?? appOrm?.schemaDiffProblem(state.tables);
      if (problem) throw new ReliableMailSetupError(problem);
      await this.templateVersions.save(statementsOnClient(client, state.tables));
      return state.tables;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
