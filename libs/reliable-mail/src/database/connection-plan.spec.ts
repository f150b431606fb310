import { describe, expect, it } from '@jest/globals';
import { type ConnectionPlan, connectionPlan, type ConnectionPlanOptions } from './connection-plan.js';

const SET = [
  'plan_cache_mode = force_generic_plan',
  'enable_seqscan = off',
  'synchronous_commit = on',
  'jit = off',
  'statement_timeout = 4000',
];
const DIRECT = 'postgres://mail@db.internal:5432/app';

/** Behind a session pooler: nothing at connect, the settings SET once on each connection. */
const sessionPlan = (listen: ConnectionPlan['listen']): ConnectionPlan => ({
  startup: null,
  onConnect: SET.map((setting) => `set ${setting}`).join('; '),
  begin: 'begin',
  statementInTransaction: false,
  namedStatements: true,
  listen,
});

/** Behind a transaction pooler: each statement in a transaction of its own that sets the settings. */
const transactionPlan = (namedStatements: boolean, listen: ConnectionPlan['listen']): ConnectionPlan => ({
  startup: null,
  onConnect: null,
  begin: ['begin', ...SET.map((setting) => `set local ${setting}`)].join('; '),
  statementInTransaction: true,
  namedStatements,
  listen,
});

describe('connectionPlan', () => {
  it.each<{ name: string; options: Omit<ConnectionPlanOptions, 'statementTimeoutMs'>; plan: ConnectionPlan }>([
    {
      name: 'PostgreSQL itself: the settings at connect, named statements, LISTEN where the pool connects',
      options: { pooler: 'none', preparedStatements: true, listenUrl: null },
      plan: {
        startup: {
          options: '-c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c synchronous_commit=on -c jit=off',
          statementTimeoutMs: 4_000,
        },
        onConnect: null,
        begin: 'begin',
        statementInTransaction: false,
        namedStatements: true,
        listen: 'url',
      },
    },
    {
      name: 'a session pooler: nothing at connect, which PgBouncer refuses, and SET once on each connection',
      options: { pooler: 'session', preparedStatements: true, listenUrl: null },
      plan: sessionPlan('url'),
    },
    {
      name: 'a transaction pooler: each statement in a transaction of its own that sets its settings, no LISTEN',
      options: { pooler: 'transaction', preparedStatements: false, listenUrl: null },
      plan: transactionPlan(false, null),
    },
    {
      name: 'a transaction pooler that keeps prepared statements, and a direct connection to LISTEN on',
      options: { pooler: 'transaction', preparedStatements: true, listenUrl: DIRECT },
      plan: transactionPlan(true, 'listenUrl'),
    },
    {
      name: 'a session pooler with a direct connection to LISTEN on',
      options: { pooler: 'session', preparedStatements: true, listenUrl: DIRECT },
      plan: sessionPlan('listenUrl'),
    },
  ])('$name', ({ options, plan }) => {
    expect(connectionPlan({ ...options, statementTimeoutMs: 4_000 })).toEqual(plan);
  });
});
