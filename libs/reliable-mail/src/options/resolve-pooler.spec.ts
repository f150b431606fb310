import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { InvalidOptionsError } from '../errors.js';
import type { DatabaseOptions } from './reliable-mail-options.interface.js';
import { resolvePooler } from './resolve-pooler.js';

const DIRECT = 'postgres://mail@db.internal:5432/app';
const POOLER = 'postgres://mail@pgbouncer.internal:6432/app';

describe('resolvePooler', () => {
  it.each<{ name: string; given: DatabaseOptions | undefined; resolved: ReturnType<typeof resolvePooler> }>([
    {
      name: 'nothing given: PostgreSQL itself, prepared statements',
      given: undefined,
      resolved: { pooler: 'none', preparedStatements: true, listenUrl: null },
    },
    {
      name: 'a session pooler keeps prepared statements',
      given: { pooler: 'session' },
      resolved: { pooler: 'session', preparedStatements: true, listenUrl: null },
    },
    {
      name: 'a transaction pooler: none, unless the app says its PgBouncer keeps them',
      given: { pooler: 'transaction' },
      resolved: { pooler: 'transaction', preparedStatements: false, listenUrl: null },
    },
    {
      name: 'a transaction pooler that keeps prepared statements (PgBouncer 1.21, max_prepared_statements)',
      given: { pooler: 'transaction', preparedStatements: true },
      resolved: { pooler: 'transaction', preparedStatements: true, listenUrl: null },
    },
    {
      name: 'a transaction pooler with a direct connection to LISTEN on',
      given: { pooler: 'transaction', listenUrl: DIRECT },
      resolved: { pooler: 'transaction', preparedStatements: false, listenUrl: DIRECT },
    },
    {
      name: 'a session pooler with a direct connection to LISTEN on',
      given: { pooler: 'session', listenUrl: DIRECT },
      resolved: { pooler: 'session', preparedStatements: true, listenUrl: DIRECT },
    },
    {
      name: 'a pooler at database.url and PostgreSQL itself at listenUrl',
      given: { url: POOLER, pooler: 'transaction', listenUrl: DIRECT },
      resolved: { pooler: 'transaction', preparedStatements: false, listenUrl: DIRECT },
    },
    {
      name: 'no prepared statements on PostgreSQL itself',
      given: { preparedStatements: false },
      resolved: { pooler: 'none', preparedStatements: false, listenUrl: null },
    },
    {
      name: 'options given as undefined take their defaults',
      given: { pooler: undefined, preparedStatements: undefined, listenUrl: undefined },
      resolved: { pooler: 'none', preparedStatements: true, listenUrl: null },
    },
  ])('$name', ({ given, resolved }) => {
    expect(resolvePooler(given)).toEqual(resolved);
  });

  it.each<{ name: string; given: unknown; option: string }>([
    { name: "PgBouncer's own name for the mode", given: { pooler: 'pgbouncer' }, option: 'database.pooler' },
    { name: 'a pooler in capitals', given: { pooler: 'Transaction' }, option: 'database.pooler' },
    {
      name: "prepared statements as 'yes'",
      given: { pooler: 'transaction', preparedStatements: 'yes' },
      option: 'database.preparedStatements',
    },
    {
      name: 'a listen URL that is no postgres:// URL',
      given: { pooler: 'transaction', listenUrl: 'db.internal:5432' },
      option: 'database.listenUrl',
    },
    { name: 'a listen URL without a pooler', given: { listenUrl: DIRECT }, option: 'database.listenUrl' },
    { name: 'a pooler as null', given: { pooler: null }, option: 'database.pooler' },
    {
      name: 'prepared statements as null',
      given: { pooler: 'transaction', preparedStatements: null },
      option: 'database.preparedStatements',
    },
    {
      name: 'a listen URL to the pooler itself',
      given: { url: POOLER, pooler: 'transaction', listenUrl: 'postgres://mail@pgbouncer.internal:6432/other' },
      option: 'database.listenUrl',
    },
    {
      name: 'a listen URL to the pooler itself, by its default port',
      given: {
        url: 'postgres://mail@pgbouncer.internal/app',
        pooler: 'session',
        listenUrl: 'postgres://pgbouncer.internal:5432/app',
      },
      option: 'database.listenUrl',
    },
  ])('$name: refused, naming $option', ({ given, option }) => {
    const resolve = () => resolvePooler(given as DatabaseOptions);
    expect(resolve).toThrow(InvalidOptionsError);
    expect(resolve).toThrow(expect.objectContaining({ option }));
  });

  it('any value of its options resolves or is refused with InvalidOptionsError, never another error', () => {
    const anyValue = fc.oneof(
      fc.anything({ withBigInt: true, withNullPrototype: true, withObjectString: true }),
      fc.constantFrom('none', 'session', 'transaction', DIRECT, POOLER, 'postgres://[::1', 'postgres://DB.internal/x'),
    );
    fc.assert(
      fc.property(anyValue, anyValue, anyValue, anyValue, (pooler, preparedStatements, listenUrl, url) => {
        try {
          resolvePooler({ pooler, preparedStatements, listenUrl, url } as DatabaseOptions);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidOptionsError);
        }
      }),
      propertyRuns('database.pooler options of any value'),
    );
  });
});
