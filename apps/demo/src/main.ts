import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { Logger, type LogLevel } from '@nestjs/common';
import { createDemoApp } from './app.module.js';
import { DEFAULT_PORT } from './demo.config.js';
import { startCaptureSmtp } from './infra/capture-smtp.js';
import { startEmbeddedPostgres } from './infra/embedded-postgres.js';
import { providerFromEnv } from './mail-transport.env.js';

// `npm start` from the repository root. With DATABASE_URL / SMTP_URL unset it brings its own PostgreSQL
// (embedded-postgres, data in .data/demo-postgres, or as root under the system temp dir) and a capture SMTP server
// (mails in .data/demo-mail/). MAIL_TRANSPORT=ses|postmark|resend sends through that provider instead (see
// mail-transport.env.ts for its variables).

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DATA_DIR = `${REPO_ROOT}.data`;
const EMBEDDED_POSTGRES_PORT = 5433;
const CAPTURE_SMTP_PORT = 2525;
const SHUTDOWN_TIMEOUT_MS = 60_000;

const logger = new Logger('Demo');

interface Resource {
  name: string;
  close(): Promise<void>;
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

function parsePort(value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new Error(`PORT must be a port number, got ${JSON.stringify(value)}`);
  return port;
}

async function closeAll(resources: Resource[]): Promise<void> {
  for (const resource of [...resources].reverse()) {
    try {
      await resource.close();
    } catch (error) {
      logger.error(`Stopping ${resource.name} failed: ${String(error)}`);
    }
  }
  resources.length = 0;
}

function printUsage(baseUrl: string, database: string, mail: string): void {
  const post = (path: string, body: string) =>
    `curl -s -XPOST ${baseUrl}${path} -H 'content-type: application/json' -d '${body}'`;
  console.log(
    [
      '',
      `Demo shop is listening on ${baseUrl}`,
      `  database: ${database}`,
      `  mail:     ${mail}`,
      '',
      'Try:',
      `  ${post('/orders', '{"email":"ann@example.com","items":[{"sku":"mug","qty":2,"price":12.5}]}')}`,
      `  curl -s ${baseUrl}/outbox/<mail.id from that answer>     # the outbox row: pending -> sent, with its attempts`,
      `  curl -s ${baseUrl}/orders/1`,
      `  ${post('/password-reset', '{"email":"ann@example.com"}')}`,
      `  curl -s ${baseUrl}/events                                # EmailSentEvent / EmailFailedEvent received`,
      `  curl -s ${baseUrl}/outbox                                # counts by status and lane, lag, recent rows`,
      `  curl -s ${baseUrl}/health                                # terminus: database, dispatcher, backlog, dead letters`,
      `  ${post('/orders', '{"email":"not-an-address","items":[{"sku":"mug","qty":1,"price":1}]}')}   # 400`,
      '',
      'Ctrl-C stops the app and what it started.',
      '',
    ].join('\n'),
  );
}

async function main(): Promise<void> {
  const resources: Resource[] = [];
  let shuttingDown = false;

  // Nest's shutdown hooks run the providers' lifecycle hooks on SIGINT/SIGTERM (the dispatcher drains its sends,
  // the ORM closes) and then raise the signal again. This listener joins that same shutdown (app.close() awaits the
  // one in flight), then stops the database and SMTP server the app used, and exits; because it stays registered,
  // the re-raised signal lands here instead of killing the process before PostgreSQL is stopped.
  let app: Awaited<ReturnType<typeof createDemoApp>> | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.log(`${signal} received: shutting down`);
    setTimeout(() => {
      logger.error(`Shutdown took longer than ${SHUTDOWN_TIMEOUT_MS / 1000} s; exiting anyway`);
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS).unref();
    void (async () => {
      try {
        await app?.close();
      } catch (error) {
        logger.error(`Closing the app failed: ${String(error)}`);
      }
      await closeAll(resources);
      logger.log('Bye');
      process.exit(0);
    })();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let phase = 'reading the environment';
  try {
    const port = parsePort(process.env.PORT, DEFAULT_PORT);
    const provider = providerFromEnv(process.env);

    let databaseUrl = process.env.DATABASE_URL;
    let databaseNote: string;
    if (databaseUrl) {
      databaseNote = `${redact(databaseUrl)} (DATABASE_URL)`;
    } else {
      phase = 'starting the embedded PostgreSQL';
      const database = await startEmbeddedPostgres({
        dataDir: `${DATA_DIR}/demo-postgres`,
        logFile: `${DATA_DIR}/demo-postgres.log`,
        database: 'shop',
        preferredPort: EMBEDDED_POSTGRES_PORT,
      });
      resources.push({ name: 'PostgreSQL', close: () => database.stop() });
      databaseUrl = database.url;
      databaseNote = `${redact(database.url)} (embedded PostgreSQL, data in ${database.dataDir}, log in ${database.logFile})`;
    }
    if (shuttingDown) return;

    let smtpUrl = process.env.SMTP_URL;
    let mailNote: string;
    if (provider) {
      mailNote = provider.description;
    } else if (smtpUrl) {
      mailNote = `${redact(smtpUrl)} (SMTP_URL)`;
    } else {
      phase = 'starting the capture SMTP server';
      const smtp = await startCaptureSmtp({ mailDir: `${DATA_DIR}/demo-mail`, preferredPort: CAPTURE_SMTP_PORT });
      resources.push({ name: 'capture SMTP server', close: () => smtp.close() });
      smtpUrl = smtp.url;
      mailNote = `${smtp.url} (capture server: every mail is written to .data/demo-mail/ as an .eml file)`;
    }
    if (shuttingDown) return;

    // reliable-mail logs every claim at debug level: shown with DEBUG=1.
    const logLevels: LogLevel[] = process.env.DEBUG
      ? ['fatal', 'error', 'warn', 'log', 'debug', 'verbose']
      : ['fatal', 'error', 'warn', 'log'];
    phase = `building the app and migrating the database ${redact(databaseUrl)}`;
    app = await createDemoApp({
      databaseUrl,
      smtpUrl,
      transport: provider?.transport,
      from: process.env.MAIL_FROM || undefined,
      port,
      logger: logLevels,
    });
    app.enableShutdownHooks(['SIGINT', 'SIGTERM']);
    phase = `listening on port ${port}`;
    try {
      await app.listen(port);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        throw new Error(`Port ${port} is already in use: stop what uses it, or start with PORT=<another port>`, {
          cause: error,
        });
      }
      throw error;
    }
    printUsage(`http://localhost:${port}`, databaseNote, mailNote);
  } catch (error) {
    if (shuttingDown) return;
    shuttingDown = true;
    const message = `Start-up failed while ${phase}: ${error instanceof Error ? error.message : String(error)}`;
    if (process.env.DEBUG && error instanceof Error) logger.error(message, error.stack);
    else logger.error(`${message}\n(DEBUG=1 npm start shows where it came from)`);
    await app?.close().catch(() => undefined);
    await closeAll(resources);
    process.exit(1);
  }
}

await main();
