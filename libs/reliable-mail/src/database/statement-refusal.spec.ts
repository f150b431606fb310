import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  mayHaveCommittedUnanswered,
  refusedForItsValues,
  sqlStateOf,
  StatementNotSentError,
} from './statement-refusal.js';

/** An error as pg raises it for a server's ErrorResponse: a DatabaseError with the SQLSTATE as its code. */
function databaseError(code: string, message: string, severity = 'ERROR'): Error {
  return Object.assign(new pg.DatabaseError(message, 0, 'error'), { code, severity });
}

describe('refusedForItsValues', () => {
  it.each([
    { code: '22P02', message: 'invalid input syntax for type json (a lone surrogate)', refused: true },
    { code: '22P05', message: 'unsupported Unicode escape sequence (\\u0000)', refused: true },
    { code: '22003', message: 'integer out of range', refused: true },
    { code: '22008', message: 'timestamp out of range', refused: true },
    { code: '22021', message: 'invalid byte sequence for encoding "UTF8"', refused: true },
    { code: '23514', message: 'new row violates check constraint', refused: true },
    { code: '23502', message: 'null value in column violates not-null constraint', refused: true },
    { code: '54000', message: 'total size of jsonb array elements exceeds the maximum', refused: true },
    { code: '08006', message: 'connection failure', refused: false },
    { code: '08P01', message: 'protocol violation', refused: false },
    { code: '57P01', message: 'terminating connection due to administrator command', refused: false },
    { code: '57P03', message: 'the database system is starting up', refused: false },
    { code: '57014', message: 'canceling statement due to statement timeout', refused: false },
    { code: '40001', message: 'could not serialize access', refused: false },
    { code: '40P01', message: 'deadlock detected', refused: false },
    { code: '53300', message: 'too many connections', refused: false },
    { code: '25006', message: 'cannot execute UPDATE in a read-only transaction (a demoted primary)', refused: false },
    { code: '42P01', message: 'relation does not exist (not migrated yet)', refused: false },
    { code: '42501', message: 'permission denied', refused: false },
  ])('SQLSTATE $code ($message): $refused', ({ code, message, refused }) => {
    expect(refusedForItsValues(databaseError(code, message))).toBe(refused);
  });

  it.each([
    { name: 'a socket error', error: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) },
    {
      name: "a broken pipe, whose code has a SQLSTATE's shape (Node gives it an errno)",
      error: Object.assign(new Error('write EPIPE'), { code: 'EPIPE', errno: -32, syscall: 'write' }),
    },
    { name: "pg's client-side timeout, without a code", error: new Error('Query read timeout') },
    { name: 'a code that is not a string', error: Object.assign(new Error('odd'), { code: 22003 }) },
    { name: 'a SQLSTATE in lower case, which PostgreSQL never sends', error: { code: '22p02' } },
    { name: 'a string thrown', error: '22P02' },
    { name: 'nothing', error: undefined },
  ])('$name: not refused for its values', ({ error }) => {
    expect(refusedForItsValues(error)).toBe(false);
  });
});

describe('sqlStateOf', () => {
  it.each([
    { name: "PostgreSQL's answer", error: databaseError('57014', 'canceling statement'), state: '57014' },
    { name: 'a broken pipe', error: Object.assign(new Error('EPIPE'), { code: 'EPIPE', errno: -32 }), state: null },
    {
      name: 'a reset',
      error: Object.assign(new Error('ECONNRESET'), { code: 'ECONNRESET', errno: -104 }),
      state: null,
    },
    { name: "pg's client-side timeout", error: new Error('Query read timeout'), state: null },
    { name: 'nothing', error: null, state: null },
  ])('$name: $state', ({ error, state }) => {
    expect(sqlStateOf(error)).toBe(state);
  });
});

describe('mayHaveCommittedUnanswered', () => {
  it.each([
    { name: "pg's client-side timeout (the statement left, no answer came)", error: new Error('Query read timeout') },
    { name: 'a connection reset mid-statement', error: Object.assign(new Error('read ECONNRESET'), { errno: -104 }) },
    { name: 'the connection ended', error: new Error('Connection terminated unexpectedly') },
    {
      name: "the session terminated (a FATAL, which may follow the statement's commit)",
      error: databaseError('57P01', 'terminating connection due to administrator command', 'FATAL'),
    },
  ])('$name: may have', ({ error }) => {
    expect(mayHaveCommittedUnanswered(error)).toBe(true);
  });

  it.each([
    {
      name: 'no connection within the bound',
      error: new StatementNotSentError('no database connection within 100 ms'),
    },
    { name: 'no time left', error: new StatementNotSentError('no time left for the statement') },
    { name: 'a statement timeout PostgreSQL cancelled', error: databaseError('57014', 'canceling statement') },
    { name: 'a serialization failure', error: databaseError('40001', 'could not serialize access') },
    { name: 'a value refused', error: databaseError('22P02', 'invalid input syntax') },
  ])('$name: has not', ({ error }) => {
    expect(mayHaveCommittedUnanswered(error)).toBe(false);
  });
});
