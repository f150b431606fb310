import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DatabaseAvailability, isOutage, reportedAsOutage } from './database-availability.js';
import { StatementNotSentError } from './statement-refusal.js';

/** An error as pg raises it for a server's ErrorResponse. */
const answer = (code: string, message = 'refused', severity = 'ERROR') =>
  Object.assign(new pg.DatabaseError(message, 0, 'error'), { code, severity });

describe('isOutage', () => {
  it.each([
    { name: 'no connection within the bound', error: new StatementNotSentError('no database connection within 10 ms') },
    { name: 'connection refused', error: new StatementNotSentError('connect ECONNREFUSED 127.0.0.1:5432') },
    { name: 'a socket reset', error: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104 }) },
    { name: "pg's client-side timeout", error: new Error('Query read timeout') },
    { name: 'the connection ended under it', error: new Error('Connection terminated unexpectedly') },
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
});

type Step = { at: number } & ({ answered: true } | { failed: Error });

describe('DatabaseAvailability', () => {
  const down = () => new StatementNotSentError('connect ECONNREFUSED 127.0.0.1:5432');

  it.each<{ name: string; steps: Step[]; changes: unknown[]; since: number | null }>([
    { name: 'statements answered: nothing to say', steps: [{ at: 0, answered: true }], changes: [null], since: null },
    {
      name: 'a 10 s outage met by 200 statements: one change as it begins, one as it ends, the rest counted',
      steps: [
        { at: 0, answered: true },
        ...Array.from({ length: 200 }, (_, index) => ({ at: 1_000 + index * 50, failed: down() })),
        { at: 11_000, answered: true },
        { at: 11_050, answered: true },
      ],
      changes: [
        null,
        { kind: 'unavailable', error: 'StatementNotSentError: connect ECONNREFUSED 127.0.0.1:5432' },
        ...Array<null>(199).fill(null),
        { kind: 'available', unavailableForMs: 10_000, failedMeanwhile: 199 },
        null,
      ],
      since: null,
    },
    {
      name: 'a refusal during an outage is an answer: the database is back',
      steps: [
        { at: 0, failed: down() },
        { at: 500, failed: answer('42P01', 'relation does not exist') },
      ],
      changes: [
        { kind: 'unavailable', error: 'StatementNotSentError: connect ECONNREFUSED 127.0.0.1:5432' },
        { kind: 'available', unavailableForMs: 500, failedMeanwhile: 0 },
      ],
      since: null,
    },
    {
      name: 'a refusal alone: no outage, nothing to say',
      steps: [{ at: 0, failed: answer('23514') }],
      changes: [null],
      since: null,
    },
    {
      name: 'two outages: each begins and ends once',
      steps: [
        { at: 0, failed: down() },
        { at: 100, answered: true },
        { at: 200, failed: answer('57P01', 'terminating connection', 'FATAL') },
        { at: 300, failed: down() },
      ],
      changes: [
        { kind: 'unavailable', error: 'StatementNotSentError: connect ECONNREFUSED 127.0.0.1:5432' },
        { kind: 'available', unavailableForMs: 100, failedMeanwhile: 0 },
        { kind: 'unavailable', error: 'error: terminating connection' },
        null,
      ],
      since: 200,
    },
  ])('$name', ({ steps, changes, since }) => {
    const availability = new DatabaseAvailability();
    const seen = steps.map((step) =>
      'answered' in step ? availability.answered(step.at) : availability.failed(step.failed, step.at),
    );
    expect(seen).toEqual(changes);
    expect(availability.unavailableSince).toBe(since);
  });

  it('marks the failures of an outage it reported, and no other: their tasks log nothing of their own', () => {
    const availability = new DatabaseAvailability();
    const first = down();
    const later = answer('57P03', 'the database system is starting up', 'FATAL');
    const refused = answer('23514');
    const unseen = down();
    availability.failed(first, 0);
    availability.failed(later, 10);
    availability.failed(refused, 20);
    expect([first, later, refused, unseen].map(reportedAsOutage)).toEqual([true, true, false, false]);
    expect(reportedAsOutage('a string')).toBe(false);
  });
});
