import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { type INestApplication, Logger } from '@nestjs/common';
import { redactUrl } from '../src/common/redact-url.js';
import { logStartupFailure, startupStep } from '../src/common/startup-error.js';
import { bootstrap, readEnvironment } from '../src/main.js';
import { startCaptureSmtp } from './capture-smtp.js';
import { startEmbeddedPostgres } from './embedded-postgres/embedded-postgres.js';
import { printUsage } from './usage.js';

// `npm start` from the repository root: the shop (../src) with nothing to configure. With DATABASE_URL unset it
// brings its own PostgreSQL (embedded-postgres, data in .data/demo-postgres, or as root under the system temp dir),
// with SMTP_URL unset and no MAIL_TRANSPORT provider a capture SMTP server (mails in .data/demo-mail/); then it
// boots the shop as ../src/main.ts would, with those in its environment.

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DATA_DIR = `${REPO_ROOT}.data`;
const EMBEDDED_POSTGRES_PORT = 5433;
const CAPTURE_SMTP_PORT = 2525;
const SHUTDOWN_TIMEOUT_MS = 60_000;

const logger = new Logger('Demo');

/** Something this launcher started, and stops after the app has closed. */
interface Resource {
  name: string;
  close(): Promise<void>;
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

async function main(): Promise<void> {
  const env = { ...process.env };
  const resources: Resource[] = [];
  let app: INestApplication | null = null;
  let shuttingDown = false;

  // bootstrap() enables Nest's shutdown hooks, which on SIGINT/SIGTERM run the providers' lifecycle hooks (the
  // dispatcher drains its sends, the ORM closes) and then raise the signal again. This listener joins that same
  // shutdown (app.close() awaits the one in flight), then stops the database and SMTP server the app used, and exits;
  // because it stays registered, the re-raised signal lands here instead of killing the process before PostgreSQL is
  // stopped.
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

  try {
    // Before anything is started: a wrong PORT or MAIL_TRANSPORT fails at once.
    const { port, provider } = await startupStep('reading the environment', () => readEnvironment(env));

    let databaseNote = `${redactUrl(env.DATABASE_URL ?? '')} (DATABASE_URL)`;
    if (!env.DATABASE_URL) {
      const database = await startupStep('starting the embedded PostgreSQL', () =>
        startEmbeddedPostgres({
          dataDir: `${DATA_DIR}/demo-postgres`,
          logFile: `${DATA_DIR}/demo-postgres.log`,
          database: 'shop',
          preferredPort: EMBEDDED_POSTGRES_PORT,
        }),
      );
      resources.push({ name: 'PostgreSQL', close: () => database.stop() });
      env.DATABASE_URL = database.url;
      databaseNote = `${redactUrl(database.url)} (embedded PostgreSQL, data in ${database.dataDir}, log in ${database.logFile})`;
    }
    if (shuttingDown) return;

    let mailNote = provider?.description ?? `${redactUrl(env.SMTP_URL ?? '')} (SMTP_URL)`;
    if (!provider && !env.SMTP_URL) {
      const smtp = await startupStep('starting the capture SMTP server', () =>
        startCaptureSmtp({ mailDir: `${DATA_DIR}/demo-mail`, preferredPort: CAPTURE_SMTP_PORT }),
      );
      resources.push({ name: 'capture SMTP server', close: () => smtp.close() });
      env.SMTP_URL = smtp.url;
      mailNote = `${smtp.url} (capture server: every mail is written to .data/demo-mail/ as an .eml file)`;
    }
    if (shuttingDown) return;

    app = await bootstrap(env);
    printUsage(`http://localhost:${port}`, databaseNote, mailNote);
  } catch (error) {
    if (shuttingDown) return;
    shuttingDown = true;
    logStartupFailure(logger, error, Boolean(env.DEBUG), 'DEBUG=1 npm start shows where it came from');
    await closeAll(resources);
    process.exit(1);
  }
}

await main();
