import { sqlStateOf, StatementNotSentError } from './statement-refusal.js';

// A database outage is one fact, however many statements it fails: every background task of the instance (each
// lane's claim at every poll, event redelivery, the heartbeat, settles, retention, metrics) meets it at once, and a
// line for each failure made several error lines a second of it. OutboxDatabase, which runs every one of their
// statements, feeds each statement's result to one `DatabaseAvailability` and logs when an outage begins and when it
// ends; the tasks leave out of their own logs the failures it has reported (`reportedAsOutage`), and log any other
// failure (a statement refused, a bug) as before.

/**
 * SQLSTATE classes in which the server says it can serve no statement now, whatever the statement: 08 connection
 * exception, 53 insufficient resources (too many connections, a full disk), 57 operator intervention (shutting
 * down, starting up; but not 57014, one statement cancelled by its timeout) and 58 system error (I/O).
 */
const OUTAGE_CLASSES = new Set(['08', '53', '57', '58']);
/** A statement cancelled by `statement_timeout`: that statement's fault or the load, and the server answered. */
const STATEMENT_TIMEOUT = '57014';
/** A read-only transaction: a hot standby or a demoted primary, which takes none of the dispatcher's writes. */
const READ_ONLY = '25006';

/**
 * Whether a statement of reliable-mail's pool that failed with `error` met a database it cannot use now: the
 * statement never left (no connection), no answer came (a socket error, a client-side timeout), or the server
 * answered that it serves no statement (see `OUTAGE_CLASSES`). False for an answer about the statement itself (a
 * refused value, a missing table, a serialization failure, a timeout): the database is there.
 */
export function isOutage(error: unknown): boolean {
  if (error instanceof StatementNotSentError) return true;
  const code = sqlStateOf(error);
  if (code === null) return true;
  if (code === STATEMENT_TIMEOUT) return false;
  return code === READ_ONLY || OUTAGE_CLASSES.has(code.slice(0, 2));
}

/** The failures whose outage has been reported: weakly held, so that an error forgotten by its task goes. */
const reported = new WeakSet<object>();

/**
 * Whether `error` failed a statement during an outage of the database that has been reported as such: the task that
 * met it logs nothing of its own.
 */
export function reportedAsOutage(error: unknown): boolean {
  return typeof error === 'object' && error !== null && reported.has(error);
}

/** What to log when the database's availability changes: the first failure of an outage, or its end. */
export type AvailabilityChange =
  { kind: 'unavailable'; error: string } | { kind: 'available'; unavailableForMs: number; failedMeanwhile: number };

/**
 * Whether the database answers reliable-mail's statements, from the outcome of each (times on any clock the caller
 * keeps to, in ms). The first failure of an outage is a change to report; the others are only counted, until a
 * statement is answered again.
 */
export class DatabaseAvailability {
  private since: number | null = null;
  private failedMeanwhile = 0;

  /** When the outage under way began, or null while the database answers. */
  get unavailableSince(): number | null {
    return this.since;
  }

  /** A statement was answered (any answer but one of `isOutage`'s): the end of an outage, if one was under way. */
  answered(now: number): AvailabilityChange | null {
    if (this.since === null) return null;
    const change = {
      kind: 'available' as const,
      unavailableForMs: now - this.since,
      failedMeanwhile: this.failedMeanwhile,
    };
    this.since = null;
    this.failedMeanwhile = 0;
    return change;
  }

  /** A statement failed with `error`: the beginning of an outage, one more failure of it, or an answer after all. */
  failed(error: unknown, now: number): AvailabilityChange | null {
    if (!isOutage(error)) return this.answered(now);
    if (typeof error === 'object' && error !== null) reported.add(error);
    if (this.since !== null) {
      this.failedMeanwhile += 1;
      return null;
    }
    this.since = now;
    return { kind: 'unavailable', error: String(error) };
  }
}
