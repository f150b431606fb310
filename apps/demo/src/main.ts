import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { type INestApplication, Logger, type LogLevel } from '@nestjs/common';
import { createDemoApp } from './app.module.js';
import { redactUrl } from './common/redact-url.js';
import { logStartupFailure, startupStep } from './common/startup-error.js';
import { DEFAULT_PORT } from './demo.config.js';
import { type ProviderChoice, providerFromEnv } from './mail-transport.env.js';

// The shop's entry point, as in any Nest app: everything it needs comes from the environment.
//
//   DATABASE_URL    postgres://user:password@host:port/database (required)
//   SMTP_URL        smtp://host:port or smtps://user:password@host, unless MAIL_TRANSPORT names a provider
//   MAIL_TRANSPORT  smtp (the default), ses, postmark, resend or file (.eml files in MAIL_DIR), with the provider's
//                   variables (mail-transport.env.ts)
//   PORT            default 3000; MAIL_FROM the sender; DEBUG=1 shows reliable-mail's debug log
//
// `npm start` runs apps/demo/local/start.ts instead, which starts a PostgreSQL and an SMTP server for whichever of
// DATABASE_URL and SMTP_URL is unset and then calls bootstrap() below.

export type Env = Record<string, string | undefined>;

/** The environment, read and checked. */
export interface ShopEnvironment {
  port: number;
  databaseUrl?: string;
  smtpUrl?: string;
  /** The provider MAIL_TRANSPORT chose; null for SMTP. */
  provider: ProviderChoice | null;
  from?: string;
  logLevels: LogLevel[];
}

function parsePort(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new Error(`PORT must be a port number, got ${JSON.stringify(value)}`);
  return port;
}

/**
 * Throws on a value that is there but wrong. What is missing is bootstrap()'s to refuse: the launcher reads the
 * environment before it has started what fills DATABASE_URL and SMTP_URL in.
 */
export function readEnvironment(env: Env): ShopEnvironment {
  return {
    port: parsePort(env.PORT),
    databaseUrl: env.DATABASE_URL || undefined,
    smtpUrl: env.SMTP_URL || undefined,
    provider: providerFromEnv(env),
    from: env.MAIL_FROM || undefined,
    // reliable-mail logs every claim at debug level: shown with DEBUG=1.
    logLevels: env.DEBUG ? ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] : ['fatal', 'error', 'warn', 'log'],
  };
}

function complete(environment: ShopEnvironment): ShopEnvironment & { databaseUrl: string } {
  const { databaseUrl, smtpUrl, provider } = environment;
  if (!databaseUrl) throw new Error('DATABASE_URL is not set');
  if (!smtpUrl && !provider) throw new Error('SMTP_URL is not set, nor MAIL_TRANSPORT to a provider');
  return { ...environment, databaseUrl };
}

async function listen(app: INestApplication, port: number): Promise<void> {
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
}

/**
 * Builds the shop from `env`, migrates its database and listens. A failure is a `StartupError` naming the step, and
 * leaves nothing open. SIGINT and SIGTERM close the app (the dispatcher finishes the sends in flight first).
 */
export async function bootstrap(env: Env = process.env): Promise<INestApplication> {
  const { port, databaseUrl, smtpUrl, provider, from, logLevels } = await startupStep('reading the environment', () =>
    complete(readEnvironment(env)),
  );
  const app = await startupStep(`building the app and migrating the database ${redactUrl(databaseUrl)}`, () =>
    createDemoApp({ databaseUrl, smtpUrl, transport: provider?.transport, from, port, logger: logLevels }),
  );
  app.enableShutdownHooks(['SIGINT', 'SIGTERM']);
  try {
    await startupStep(`listening on port ${port}`, () => listen(app, port));
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

// Run directly (`node … apps/demo/src/main.ts`, or the build's main.js), not when imported by the launcher or a test.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const logger = new Logger('Shop');
  bootstrap().then(
    (app) => {
      const url = `http://localhost:${((app.getHttpServer() as Server).address() as AddressInfo).port}`;
      logger.log(`Listening on ${url}; the mail console is at ${url}/mail, each mail as sent at ${url}/mail/preview`);
    },
    (error: unknown) => {
      logStartupFailure(logger, error, Boolean(process.env.DEBUG), 'DEBUG=1 shows where it came from');
      process.exit(1);
    },
  );
}
