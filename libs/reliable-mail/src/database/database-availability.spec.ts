import { runInNewContext } from 'node:vm';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DatabaseAvailability, isOutage, PoolExhaustedError, reportedAsOutage } from './database-availability.js';
import { StatementNotSentError } from './statement-refusal.js';

/** An error as pg raises it for a server's ErrorResponse. */
const answer = (code: string, message = 'refused', severity = 'ERROR') =>
  Object.assign(new pg.DatabaseError(message, 0, 'error'), { code, severity });

/** A socket error as Node raises it. */
const socketError = (syscall: string, code: string, errno: number) =>
  Object.assign(new Error(`${syscall} ${code}`), { code, errno, syscall });
const poolExhausted = () =>
  new PoolExhaustedError("no database connection within 10000 ms: all 10 of reliable-mail's connections were busy");
/** What pg throws when a value's toPostgres throws, before the statement leaves. */
const prepareValueFailed = () => new TypeError("Cannot read properties of undefined (reading 'toISOString')");

describe('isOutage', () => {
  it.each([
    { name: 'no connection within the bound', error: new StatementNotSentError('no database connection within 10 ms') },
    { name: 'connection refused', error: new StatementNotSentError('connect ECONNREFUSED 127.0.0.1:5432') },
    { name: 'a socket reset', error: socketError('read', 'ECONNRESET', -104) },
    {
      name: "a socket reset made in another realm (Node's own errors, as jest's sandbox sees them)",
      error: runInNewContext(
        "Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' })",
      ) as unknown,
    },
    { name: 'a socket timeout', error: socketError('read', 'ETIMEDOUT', -110) },
    { name: 'a broken pipe', error: socketError('write', 'EPIPE', -32) },
    { name: 'a host name not found', error: socketError('getaddrinfo', 'ENOTFOUND', -3008) },
    { name: "pg's client-side timeout", error: new Error('Query read timeout') },
    { name: 'the connection ended under it', error: new Error('Connection terminated unexpectedly') },
    {
      name: 'a client whose connection had failed',
      error: new Error('Client has encountered a connection error and is not queryable'),
    },
    { name: 'administrator shutdown (57P01)', error: answer('57P01', 'terminating connection', 'FATAL') },
    { name: 'starting up (57P03)', error: answer('57P03', 'the database system is starting up', 'FATAL') },
    { name: 'connection failure (08006)', error: answer('08006') },
    { name: 'too many connections (53300)', error: answer('53300', 'too many clients', 'FATAL') },
    { name: 'disk full (53100)', error: answer('53100') },
    { name: 'I/O error (58030)', error: answer('58030') },
    { name: 'a hot standby (25006)', error: answer('25006', 'cannot execute UPDATE in a read-only transaction') },
  ])('$name: an outage', ({ error }) => {
    expect(isOutage(error)).toBe(true);
  });

  it.each([
    { name: 'a statement timeout (57014)', error: answer('57014', 'canceling statement due to statement timeout') },
    { name: 'a value refused (22P02)', error: answer('22P02') },
    { name: 'a check violated (23514)', error: answer('23514') },
    { name: 'a missing table (42P01)', error: answer('42P01', 'relation does not exist') },
    { name: 'permission denied (42501)', error: answer('42501') },
    { name: 'a serialization failure (40001)', error: answer('40001') },
    { name: 'a deadlock (40P01)', error: answer('40P01') },
  ])('$name: the database answered, no outage', ({ error }) => {
    expect(isOutage(error)).toBe(false);
  });

  it.each([
    { name: 'every connection of the pool busy', error: poolExhausted() },
    { name: "a value pg's prepareValue could not serialize", error: prepareValueFailed() },
    { name: 'a row pg could not parse', error: new SyntaxError('Unexpected token } in JSON at position 12') },
    { name: "the app's own error", error: new Error('the resolver broke') },
    { name: 'not an error at all', error: 'a string' },
  ])('$name: no SQLSTATE, and no outage either', ({ error }) => {
    expect(isOutage(error)).toBe(false);
  });
});

type Step = { at: number } & ({ answered: true } | { failed: unknown });

/** Every `ms` from `from` until before `to`. */
const every = (ms: number, from: number, to: number) =>
  Array.from({ length: Math.ceil((to - from) / ms) }, (_, index) => from + index * ms);

describe('DatabaseAvailability', () => {
  const down = () => new StatementNotSentError('connect ECONNREFUSED 127.0.0.1:5432');
  const readOnly = () => answer('25006', 'cannot execute UPDATE in a read-only transaction');
  const tooManyClients = () => answer('53300', 'sorry, too many clients already', 'FATAL');
  const unavailable = (at: number, error = 'StatementNotSentError: connect ECONNREFUSED 127.0.0.1:5432') => ({
    at,
    kind: 'unavailable',
    error,
  });
  const available = (at: number, unavailableForMs: number, failedMeanwhile: number) => ({
    at,
    kind: 'available',
    unavailableForMs,
    failedMeanwhile,
  });

  it.each<{ name: string; steps: Step[]; changes: unknown[]; since: number | null }>([
    { name: 'statements answered: nothing to say', steps: [{ at: 0, answered: true }], changes: [], since: null },
    {
      name: 'a 10 s outage met by 200 statements: one change as it begins, one once it has failed none for 5 s',
      steps: [
        { at: 0, answered: true },
        ...every(50, 1_000, 11_000).map((at) => ({ at, failed: down() })),
        ...every(1_000, 11_000, 17_000).map((at) => ({ at, answered: true as const })),
      ],
      changes: [unavailable(1_000), available(16_000, 10_000, 199)],
      since: null,
    },
    {
      name: 'a refusal during an outage is an answer: the database is back',
      steps: [
        { at: 0, failed: down() },
        { at: 500, failed: answer('42P01', 'relation does not exist') },
        { at: 5_000, failed: answer('42P01', 'relation does not exist') },
      ],
      changes: [unavailable(0), available(5_000, 500, 0)],
      since: null,
    },
    {
      name: 'a refusal alone: no outage, nothing to say',
      steps: [{ at: 0, failed: answer('23514') }],
      changes: [],
      since: null,
    },
    {
      name: 'two outages: each begins and ends once',
      steps: [
        { at: 0, failed: down() },
        { at: 100, answered: true },
        { at: 5_000, answered: true },
        { at: 6_000, failed: answer('57P01', 'terminating connection', 'FATAL') },
        { at: 6_100, failed: down() },
      ],
      changes: [unavailable(0), available(5_000, 100, 0), unavailable(6_000, 'error: terminating connection')],
      since: 6_000,
    },
    {
      name: 'a standby refusing the writes (25006) and answering the reads for a minute: one outage, not a pair of lines per poll',
      steps: [
        ...every(50, 0, 60_000).flatMap((at) => [
          { at, failed: readOnly() },
          { at: at + 25, answered: true as const },
        ]),
        // Promoted: the writes are taken again.
        ...every(50, 60_000, 70_000).map((at) => ({ at, answered: true as const })),
      ],
      changes: [
        unavailable(0, 'error: cannot execute UPDATE in a read-only transaction'),
        available(64_950, 59_975, 1_199),
      ],
      since: null,
    },
    {
      name: 'new connections refused (53300) every 2 s while the open ones answer: one outage',
      steps: [
        ...every(100, 0, 30_000).map((at) =>
          at <= 20_000 && at % 2_000 === 0 ? { at, failed: tooManyClients() } : { at, answered: true as const },
        ),
      ],
      changes: [unavailable(0, 'error: sorry, too many clients already'), available(25_000, 20_100, 10)],
      since: null,
    },
    {
      name: "a fault of pg's or a full pool neither begins an outage nor ends one",
      steps: [
        { at: 0, failed: prepareValueFailed() },
        { at: 10, failed: poolExhausted() },
        { at: 100, failed: down() },
        { at: 5_200, failed: prepareValueFailed() },
        { at: 5_300, failed: poolExhausted() },
        { at: 5_400, answered: true },
      ],
      changes: [unavailable(100), available(5_400, 5_300, 1)],
      since: null,
    },
  ])('$name', ({ steps, changes, since }) => {
    const availability = new DatabaseAvailability();
    const seen = steps.flatMap((step) => {
      const change = 'answered' in step ? availability.answered(step.at) : availability.failed(step.failed, step.at);
      return change ? [{ at: step.at, ...change }] : [];
    });
    expect(seen).toEqual(changes);
    expect(availability.unavailableSince).toBe(since);
  });

  it('marks the failures of an outage it reported, and a full pool during one, and no other: their tasks log nothing of their own', () => {
    const availability = new DatabaseAvailability();
    const busyAlone = poolExhausted();
    const first = down();
    const later = answer('57P03', 'the database system is starting up', 'FATAL');
    const busyMeanwhile = poolExhausted();
    const refused = answer('23514');
    const fault = prepareValueFailed();
    const unseen = down();
    availability.failed(busyAlone, 0);
    availability.failed(first, 10);
    availability.failed(later, 20);
    availability.failed(busyMeanwhile, 30);
    availability.failed(refused, 40);
    availability.failed(fault, 50);
    expect([busyAlone, first, later, busyMeanwhile, refused, fault, unseen].map(reportedAsOutage)).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
    expect(reportedAsOutage('a string')).toBe(false);
  });
});
