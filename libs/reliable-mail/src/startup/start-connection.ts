import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type pg from 'pg';
import { ReliableMailSetupError } from '../errors.js';
import { sqlStateOf } from '../database/statement-refusal.js';

const FIRST_RETRY_MS = 250;
const LONGEST_RETRY_MS = 5_000;

/**
 * Refusals that waiting does not mend: a wrong password or role (class 28), a database that does not exist (3D000),
 * a pooler that takes none of the settings (see below). Everything else (no answer, a refused connection, a server
 * starting up or in recovery, too many connections) is what a deploy during a failover or restart meets, and is tried
 * again.
 */
const lasting = (error: unknown): boolean => {
  const state = sqlStateOf(error);
  return state !== null && (state.startsWith('28') || state === '3D000' || refusedByPooler(error));
};

/**
 * PgBouncer's refusal (08P01) of a startup parameter it does not track: reliable-mail's settings and
 * statement_timeout, sent at connect when `database.pooler` says there is no pooler.
 */
const refusedByPooler = (error: unknown): boolean =>
  sqlStateOf(error) === '08P01' && /^unsupported startup parameter/.test((error as Error).message);

/** host:port of a connection's settings, for messages (never its password). */
export function hostOf(config: pg.ClientConfig): string {
  if (config.connectionString) {
    const url = new URL(config.connectionString);
    return `${url.hostname || 'localhost'}:${url.port || 5432}`;
  }
  return `${config.host ?? 'localhost'}:${config.port ?? 5432}`;
}

/**
 * A connection for the start's own statements, opened within `timeoutMs`: a database that does not answer is tried
 * again with backoff, with one log line each time what it answers changes, and then one error that names the host.
 */
export async function openStartConnection(
  open: () => pg.Client,
  config: pg.ClientConfig,
  timeoutMs: number,
  logger: Logger,
): Promise<pg.Client> {
  const deadline = performance.now() + timeoutMs;
  let delay = FIRST_RETRY_MS;
  let lastProblem: string | null = null;
  for (;;) {
    const client = open();
    try {
      await client.connect();
      if (lastProblem !== null) logger.log({ msg: 'the database answers', host: hostOf(config) });
      return client;
    } catch (error) {
      await client.end().catch(() => undefined);
      const problem = error instanceof Error ? error.message : String(error);
      const left = deadline - performance.now();
      if (lasting(error) || left <= 0) {
        throw new ReliableMailSetupError(
          `reliable-mail could not connect to the database at ${hostOf(config)}` +
            (lasting(error) ? '' : ` within database.startTimeoutMs (${timeoutMs} ms)`) +
            `: ${problem}` +
            (refusedByPooler(error)
              ? ". A pooler such as PgBouncer is in the way: say which mode it pools in, database.pooler 'session' " +
                "or 'transaction'"
              : ''),
        );
      }
      if (problem !== lastProblem) {
        logger.warn({ msg: 'the database does not answer yet; trying again', host: hostOf(config), error: problem });
        lastProblem = problem;
      }
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, LONGEST_RETRY_MS);
    }
  }
}
