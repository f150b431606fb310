import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { defineConfig } from '@mikro-orm/postgresql';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import {
  ConsoleLogger,
  type DynamicModule,
  Injectable,
  type INestApplication,
  type LoggerService,
  type Type,
} from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import {
  EMAIL_BOUNCED_EVENT,
  EMAIL_COMPLAINED_EVENT,
  EMAIL_DELIVERED_EVENT,
  EMAIL_FAILED_EVENT,
  EMAIL_SENT_EVENT,
  EmailBouncedEvent,
  EmailComplainedEvent,
  EmailDeliveredEvent,
  EmailFailedEvent,
  EmailSentEvent,
  ReliableMailModule,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { migrateSchema, migrationConnection } from '../../libs/reliable-mail/src/schema/migrate-schema.js';

const DISPATCHER_PROCESS = fileURLToPath(new URL('./dispatcher-process.ts', import.meta.url));

/**
 * Records the events the app receives, for assertions, each once: events go out at least once, and one whose
 * confirmation outlasts the tests' 1 s event lease on a loaded machine comes again with the same `eventId`, which a
 * count of exactly N would read as one too many and wait for in vain. `repeated` counts those, for a test that an
 * event is not emitted twice within less than a lease.
 */
@Injectable()
export class EventRecorder {
  readonly sent: EmailSentEvent[] = [];
  readonly failed: EmailFailedEvent[] = [];
  readonly bounced: EmailBouncedEvent[] = [];
  readonly complained: EmailComplainedEvent[] = [];
  readonly delivered: EmailDeliveredEvent[] = [];
  /** Events heard again with an `eventId` already recorded. */
  repeated = 0;
  private readonly heard = new Set<string>();

  @OnEvent(EMAIL_SENT_EVENT)
  onSent(event: EmailSentEvent): void {
    this.record(this.sent, event);
  }

  @OnEvent(EMAIL_FAILED_EVENT)
  onFailed(event: EmailFailedEvent): void {
    this.record(this.failed, event);
  }

  @OnEvent(EMAIL_BOUNCED_EVENT)
  onBounced(event: EmailBouncedEvent): void {
    this.record(this.bounced, event);
  }

  @OnEvent(EMAIL_COMPLAINED_EVENT)
  onComplained(event: EmailComplainedEvent): void {
    this.record(this.complained, event);
  }

  @OnEvent(EMAIL_DELIVERED_EVENT)
  onDelivered(event: EmailDeliveredEvent): void {
    this.record(this.delivered, event);
  }

  private record<E extends { eventId: string }>(list: E[], event: E): void {
    if (this.heard.has(event.eventId)) {
      this.repeated++;
      return;
    }
    this.heard.add(event.eventId);
    list.push(event);
  }
}

/**
 * The logger of the test apps: it prints errors only, and keeps what was logged at warn level, for a test that
 * counts such lines (each lane pause is one). Nest's logger is one per test file, so this is too.
 */
class RecordingLogger extends ConsoleLogger {
  readonly warnings: unknown[] = [];

  constructor() {
    super({ logLevels: ['error'] });
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    this.warnings.push(message);
    super.warn(message, ...rest);
  }
}

export const testLogger = new RecordingLogger();

/** The test apps' MikroORM: no entities of reliable-mail's, whose tables are in a schema the ORM leaves alone. */
export function ormConfig(databaseUrl: string) {
  return defineConfig({
    clientUrl: databaseUrl,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    schemaGenerator: { ignoreSchema: ['reliable_mail'] },
    allowGlobalContext: true,
    debug: false,
  });
}

/** Brings the database to reliable-mail's schema, as `npx reliable-mail migrate` does at deploy time. */
export async function migrate(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await migrateSchema(migrationConnection(client));
  } finally {
    await client.end();
  }
}

/** Options that make tests fast: short polls and retries, timeouts that fit a stalled test server. */
export function testMailOptions(smtpUrl: string, overrides: Partial<ReliableMailOptions> = {}): ReliableMailOptions {
  return {
    transport: {
      ...smtpTransportOptions(smtpUrl),
      connectionTimeout: 2_000,
      greetingTimeout: 2_000,
      socketTimeout: 2_000,
    },
    from: 'shop@example.com',
    messageIdDomain: 'test.example.com',
    ...overrides,
    dispatcher: {
      pollIntervalMs: 50,
      leaseMs: 15_000,
      sendTimeoutMs: 5_000,
      shutdownTimeoutMs: 5_000,
      eventLeaseMs: 1_000,
      ...overrides.dispatcher,
    },
    // A minute of age: attempts enough for it at these delays, so a test never sees a row die of attempts first.
    retry: { baseDelayMs: 10, maxDelayMs: 50, maxAgeMs: 60_000, ...overrides.retry },
    // The longest statement timeout the 15 s lease allows with a 5 s send (5 + 4 + 5 + 1 s, see dispatcher.leaseMs).
    database: { statementTimeoutMs: 4_000, ...overrides.database },
  };
}

function smtpTransportOptions(smtpUrl: string) {
  const url = new URL(smtpUrl);
  return { host: url.hostname, port: Number(url.port), secure: false, ignoreTLS: true };
}

export interface TestAppOptions {
  /**
   * Whether the app imports `ScheduleModule.forRoot()`, which the dispatcher and retention need and an instance that
   * only enqueues does not.
   * @default true
   */
  scheduler?: boolean;
  /** Modules besides reliable-mail's, such as `ReliableMailWebhooksModule.forRoot(…)`. */
  imports?: DynamicModule[];
  /** The HTTP adapter: Nest's default (Express), or Fastify. @default 'express' */
  http?: 'express' | 'fastify';
  /**
   * Whether the app has a MikroOrmModule. An app on another stack has none, and gives reliable-mail `database.url`.
   * @default true
   */
  mikroOrm?: boolean;
  /** The app's logger. @default `testLogger` */
  logger?: LoggerService;
  /**
   * Whether the app has the `EventRecorder`, a listener of every event. An app without it listens to none: its
   * events are recorded only for the relay's destinations.
   * @default true
   */
  eventRecorder?: boolean;
}

export async function createTestApp(
  databaseUrl: string,
  mailOptions: ReliableMailOptions,
  extraProviders: Type[] = [],
  {
    scheduler = true,
    imports = [],
    http = 'express',
    mikroOrm = true,
    logger = testLogger,
    eventRecorder = true,
  }: TestAppOptions = {},
): Promise<INestApplication & { events: EventRecorder }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      ...(mikroOrm ? [MikroOrmModule.forRoot(ormConfig(databaseUrl))] : []),
      EventEmitterModule.forRoot(),
      ...(scheduler ? [ScheduleModule.forRoot()] : []),
      // Global, as the README's quick start has it: ReliableMailWebhooksModule needs its MailFeedbackService.
      ReliableMailModule.forRoot({ ...mailOptions, isGlobal: true }),
      ...imports,
    ],
    providers: [...(eventRecorder ? [EventRecorder] : []), ...extraProviders],
  }).compile();
  // Webhook signatures cover the body as sent: the app keeps it, as the README asks of apps with webhooks.
  const appOptions = { logger, rawBody: true };
  const app =
    http === 'fastify'
      ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), appOptions)
      : moduleRef.createNestApplication(appOptions);
  try {
    await app.init();
  } catch (error) {
    // An app that fails at start still holds its database connections.
    await app.close().catch(() => undefined);
    throw error;
  }
  return Object.assign(app, { events: eventRecorder ? app.get(EventRecorder) : new EventRecorder() });
}

/** Starts `test/support/dispatcher-process.ts` in a child process, resolved once it printed `ready`. */
export async function spawnDispatcherProcess(
  args: Record<string, unknown>,
): Promise<{ child: ChildProcess; lines: string[] }> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@reliable-mail/source',
      '--import',
      '@swc-node/register/esm-register',
      DISPATCHER_PROCESS,
      JSON.stringify(args),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );
  const lines: string[] = [];
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const complete = buffered.split('\n');
    buffered = complete.pop()!;
    lines.push(...complete);
  });
  await waitFor('the dispatcher process to start', () => lines.includes('ready') || child.exitCode !== null, 60_000);
  if (!lines.includes('ready')) throw new Error(`dispatcher process exited with ${child.exitCode}`);
  return { child, lines };
}

/** Polls until `condition` holds, failing with `description` after `timeoutMs`. */
export async function waitFor(
  description: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for: ${description}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
