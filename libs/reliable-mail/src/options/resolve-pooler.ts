import { type Pooler, POOLERS } from '../database/connection-plan.js';
import { InvalidOptionsError } from '../errors.js';
import type { DatabaseOptions } from './reliable-mail-options.interface.js';
import { shown } from '../shared/shown.js';
import { POSTGRES_URL } from './require.js';

export interface ResolvedPooler {
  pooler: Pooler;
  preparedStatements: boolean;
  listenUrl: string | null;
}

/**
 * `database.pooler` and what goes with it. Prepared statements are on unless the pooler lends a session per
 * transaction, where only PgBouncer 1.21 or later keeps them, which reliable-mail cannot ask it: the app says so. A
 * `listenUrl` without a pooler is refused rather than ignored: LISTEN would not go where it says; and so is one to
 * the pooler itself, which would LISTEN through it.
 */
export function resolvePooler(database: DatabaseOptions | undefined): ResolvedPooler {
  const pooler = database?.pooler === undefined ? 'none' : database.pooler;
  if (!POOLERS.includes(pooler)) {
    throw new InvalidOptionsError(
      'database.pooler',
      `must be 'none' (PostgreSQL itself), 'session' or 'transaction' (PgBouncer's pool_mode), got ${shown(pooler)}`,
    );
  }
  const preparedStatements =
    database?.preparedStatements === undefined ? pooler !== 'transaction' : database.preparedStatements;
  if (typeof preparedStatements !== 'boolean') {
    throw new InvalidOptionsError('database.preparedStatements', 'must be a boolean');
  }
  const listenUrl = database?.listenUrl ?? null;
  if (listenUrl !== null && (typeof listenUrl !== 'string' || !POSTGRES_URL.test(listenUrl))) {
    throw new InvalidOptionsError('database.listenUrl', `must be a postgres:// URL, got ${shown(listenUrl)}`);
  }
  if (listenUrl !== null && pooler === 'none') {
    throw new InvalidOptionsError(
      'database.listenUrl',
      "is the connection that LISTENs around a pooler (database.pooler 'session' or 'transaction'); with pooler " +
        "'none', LISTEN goes where database.url does",
    );
  }
  const listenServer = listenUrl === null ? null : serverOf(listenUrl);
  if (listenServer !== null && typeof database?.url === 'string' && listenServer === serverOf(database.url)) {
    throw new InvalidOptionsError(
      'database.listenUrl',
      `goes to ${listenServer}, the pooler of database.url: it must reach PostgreSQL itself. LISTEN through a ` +
        'transaction pooler never hears anything; through a session pooler it needs no listenUrl',
    );
  }
  return { pooler, preparedStatements, listenUrl };
}

/**
 * host:port of a postgres:// URL (5432 when it names none), in lower case (URL keeps the case of a host in a scheme it
 * does not know), or null when it is no URL at all.
 */
function serverOf(url: string): string | null {
  try {
    const { hostname, port } = new URL(url);
    return `${hostname.toLowerCase() || 'localhost'}:${port || 5432}`;
  } catch {
    return null;
  }
}
