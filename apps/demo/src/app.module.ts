import 'reflect-metadata';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { MikroORM, PostgreSqlDriver } from '@mikro-orm/postgresql';
import {
  type DynamicModule,
  type INestApplication,
  Logger,
  type LoggerService,
  type LogLevel,
  Module,
} from '@nestjs/common';
import { AbstractHttpAdapter, APP_FILTER, NestFactory } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ScheduleModule } from '@nestjs/schedule';
import {
  ReliableMailConsoleModule,
  ReliableMailErrorFilter,
  ReliableMailModule,
  ReliableMailWebhooksModule,
} from '@reliable-mail/nestjs';
import { AccountsModule } from './accounts/accounts.module.js';
import { AuditModule } from './audit/audit.module.js';
import { DemoConfigModule } from './common/demo-config.module.js';
import { DEMO_CONFIG, type DemoAppOptions, type DemoConfig, resolveDemoConfig } from './demo.config.js';
import { demoOrmConfig } from './orm.config.js';
import { OrdersModule } from './orders/orders.module.js';
import { HealthModule } from './health/health.module.js';
import { OutboxModule } from './outbox/outbox.module.js';

export type { DemoAppOptions, DemoConfig } from './demo.config.js';
export { DEMO_CONFIG } from './demo.config.js';
export { AuditService, type AuditEntry } from './audit/audit.service.js';

@Module({})
export class AppModule {
  static forRoot(config: DemoConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        DemoConfigModule.forRoot(config),
        MikroOrmModule.forRootAsync({
          driver: PostgreSqlDriver,
          inject: [DEMO_CONFIG],
          useFactory: (demo: DemoConfig) => demoOrmConfig(demo.databaseUrl),
        }),
        EventEmitterModule.forRoot(),
        ScheduleModule.forRoot(),
        ReliableMailModule.forRootAsync({
          isGlobal: true,
          inject: [DEMO_CONFIG],
          useFactory: (demo: DemoConfig) => demo.mail,
        }),
        ReliableMailConsoleModule.forRoot({ path: 'mail', ...config.console }),
        ...(config.webhooks
          ? [ReliableMailWebhooksModule.forRoot({ path: 'webhooks/mail', sources: config.webhooks })]
          : []),
        OrdersModule,
        AccountsModule,
        OutboxModule,
        AuditModule,
        HealthModule,
      ],
      providers: [{ provide: APP_FILTER, useClass: ReliableMailErrorFilter }],
    };
  }
}

/** Loaded only when asked for: the demo runs on Express, and its tests run it on Fastify too. */
async function fastifyAdapter(): Promise<AbstractHttpAdapter> {
  const { FastifyAdapter } = await import('@nestjs/platform-fastify');
  return new FastifyAdapter();
}

export interface CreateDemoAppOptions extends DemoAppOptions {
  /** Nest's logger option; tests may pass `['error']` or `false`. */
  logger?: LoggerService | LogLevel[] | false;
}

/**
 * Builds the demo shop against the given database and SMTP server, applies the migrations (reliable-mail's, then
 * the demo's `orders` table) and returns the app NOT yet listening: call `app.listen(port)`, or `app.init()` for
 * in-process requests. Closing the app (`app.close()`) stops the dispatcher and the ORM; the database and the SMTP
 * server are the caller's.
 */
export async function createDemoApp(options: CreateDemoAppOptions): Promise<INestApplication> {
  const config = resolveDemoConfig(options);
  const settings = {
    // Errors while building the module throw to the caller instead of ending the process.
    abortOnError: false,
    // Webhook signatures cover the body as it was sent.
    rawBody: true,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  };
  const app =
    options.platform === 'fastify'
      ? await NestFactory.create(AppModule.forRoot(config), await fastifyAdapter(), settings)
      : await NestFactory.create(AppModule.forRoot(config), settings);
  try {
    // Before init: the dispatcher starts claiming rows on bootstrap, so the tables must exist by then.
    const executed = await app.get(MikroORM).migrator.up();
    new Logger('Migrations').log(
      executed.length > 0
        ? `Applied ${executed.map((migration) => migration.name).join(', ')}`
        : 'Database schema is up to date',
    );
  } catch (error) {
    await app.close();
    throw error;
  }
  return app;
}
