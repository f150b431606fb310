import { DEFAULT_SCHEMA, tablesIn } from '../schema/outbox-tables.js';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import pg from 'pg';
import type { SqlClient, Statement } from '../database/sql-client.js';
import { DatabaseAvailability } from '../database/database-availability.js';
import { StatementNotSentError } from '../database/statement-refusal.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import { resolveOptions } from '../options/resolve-options.js';
import type { ClaimedRow } from '../outbox/queue.types.js';
import type { Attempt, Delivery } from './delivery.js';
import type { AttemptResult } from './settlement.js';
import { GRANT_TO_SEND_MS, type SharedSendQuota } from '../quota/index.js';
import { LaneLoop } from './lane-loop.js';
import { LanePriorities } from './lane-priorities.js';
import type { Settler } from './settler.js';

// The lane loop against a database that answers as each test says: which statements it runs, and which rows it sends.

/**
 * The shortest lease these timeouts allow: a 4 s send, a statement's bound (1 s + the client's 5 s) and the settle's
 * 1 s. A row claimed ahead that waited a second has 10 s left: more than half a send less than its lease, and less
 * than a send and its settle need.
 */
const options = resolveOptions(
  {
    transport: 'smtp://127.0.0.1:1',
    from: 'shop@example.com',
    messageIdDomain: 'test.example.com',
    lanes: { default: { concurrency: 1 } },
    dispatcher: { pollIntervalMs: 10, leaseMs: 11_000, sendTimeoutMs: 4_000 },
    database: { statementTimeoutMs: 1_000 },
  },
  'test',
  1,
);

const claimRecord = (id: string) => ({
  id,
  message_id: `<${id}@test.example.com>`,
  idempotency_key: null,
  payload: {},
  metadata: null,
  attempts: 1,
  max_attempts: 3,
  age_from: new Date(),
  lane: 'default',
  expires_at: null,
  attempt_id: `attempt-${id}`,
  skip_reason: null,
  suppressed: [],
  possibly_taken: [],
  accepted_recipients: null,
  rejected_recipients: null,
});

type Answer = (statement: string, values: readonly unknown[]) => Promise<unknown[]> | undefined;

/** What the transport made of every row: nobody to send to, so nothing to say of the server. */
const accepted: AttemptResult = {
  kind: 'attempted',
  recipients: [],
  reply: null,
  providerMessageId: null,
  slowDown: false,
};

/** A lane loop whose database answers each statement by `answer` (an empty result when it gives none). */
function laneWith(answer: Answer, result: AttemptResult = accepted, quota: SharedSendQuota | null = null) {
  const statements: string[] = [];
  /** The ids of the rows handed back untouched. */
  const released: string[] = [];
  const database: SqlClient = {
    query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
      const { name, text } = statement.in(tablesIn(DEFAULT_SCHEMA));
      statements.push(name ?? text);
      if (name === 'reliable_mail_release') released.push(...(values[0] as string[]));
      // Unless a test says otherwise, a lane that asks whether a row is due hears yes, and goes on to its claim.
      const unanswered = name === 'reliable_mail_any_due' ? [{ due: true }] : [];
      return (answer(name ?? '', values) ?? Promise.resolve(unanswered)) as Promise<R[]>;
    },
  };
  const delivered: string[] = [];
  /** When each send started (`Date.now()`). */
  const startedAt: number[] = [];
  const sends: Array<() => void> = [];
  const delivery = {
    attempt: (row: ClaimedRow) => {
      delivered.push(row.id);
      startedAt.push(Date.now());
      return new Promise<Attempt>((resolve) => sends.push(() => resolve({ result, durationMs: 1 })));
    },
  } as unknown as Delivery;
  const settled: string[] = [];
  const settler = {
    settle: async ({ id }: { id: string }) => {
      settled.push(id);
      return { applied: true, event: null };
    },
  } as unknown as Settler;
  const quiet = () => undefined;
  const logged: Array<{ level: string; msg: unknown }> = [];
  const log = (level: string) => (entry: { msg?: unknown }) => logged.push({ level, msg: entry.msg });
  const logger = { debug: log('debug'), log: log('log'), warn: log('warn'), error: log('error') } as unknown as Logger;
  const loop = new LaneLoop(options.lanes[0], {
    database,
    scheduler: new SchedulerRegistry(),
    delivery,
    settler,
    priorities: new LanePriorities(options.lanes),
    quota,
    publisher: { publish: quiet } as unknown as MailEventPublisher,
    metrics: { recordAttempt: quiet, recordFinal: quiet } as unknown as MailMetrics,
    options,
    logger,
  });
  return { loop, statements, released, delivered, startedAt, sends, logged, settled };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Polls until `holds`, failing with `what` after 5 s. */
async function waitFor(what: string, holds: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 5_000; !holds(); await wait(5))
    if (Date.now() > deadline) throw new Error(`Timed out waiting for: ${what}`);
}
/** An error as pg raises it for a server's ErrorResponse. */
const databaseError = (code: string, severity: string) =>
  Object.assign(new pg.DatabaseError('refused', 0, 'error'), { code, severity });

describe('LaneLoop', () => {
  const lanes: Array<ReturnType<typeof laneWith>> = [];
  afterEach(async () => {
    for (const { loop, sends } of lanes.splice(0)) {
      const stopped = loop.stop(1_000);
      for (const send of sends.splice(0)) send();
      await stopped;
    }
  });
  const started = (lane: ReturnType<typeof laneWith>) => {
    lanes.push(lane);
    lane.loop.start();
    return lane;
  };

  describe('a failed claim', () => {
    const failingOnce = (error: Error): Answer => {
      let failed = false;
      return (statement) => {
        if (statement !== 'reliable_mail_claim' || failed) return undefined;
        failed = true;
        return Promise.reject(error);
      };
    };

    it.each([
      { name: 'that never left (no connection)', error: new StatementNotSentError('no database connection in 10 ms') },
      { name: 'that had no time left', error: new StatementNotSentError('no time left for the statement') },
      { name: 'that PostgreSQL cancelled (57014)', error: databaseError('57014', 'ERROR') },
      { name: 'that PostgreSQL refused to serialize (40001)', error: databaseError('40001', 'ERROR') },
    ])('$name holds no rows: nothing is handed back for it', async ({ error }) => {
      const { statements } = started(laneWith(failingOnce(error)));
      // Polled rather than timed: a loaded machine may take longer than a few poll intervals for three claims.
      await waitFor(
        'two claims after the failed one',
        () => statements.filter((name) => name === 'reliable_mail_claim').length > 2,
      );
      expect(statements).not.toContain('reliable_mail_release_unanswered');
    });

    it('failing at every poll through an outage the database reported: not a line; failing otherwise: a line each', async () => {
      const availability = new DatabaseAvailability();
      // The first three claims fail, then the database answers again.
      const failing = (reported: boolean): Answer => {
        let failures = 0;
        return (statement) => {
          if (statement !== 'reliable_mail_claim' || failures++ >= 3) return undefined;
          const error = new StatementNotSentError('no database connection in 10 ms');
          if (reported) availability.failed(error, Date.now());
          return Promise.reject(error);
        };
      };
      const duringOutage = started(laneWith(failing(true)));
      const alone = started(laneWith(failing(false)));
      const claims = ({ statements }: ReturnType<typeof laneWith>) =>
        statements.filter((name) => name === 'reliable_mail_claim').length;
      await waitFor('a claim after the three failed in each lane', () => claims(duringOutage) > 3 && claims(alone) > 3);
      expect(duringOutage.logged).toEqual([]);
      expect(alone.logged).toHaveLength(3);
      expect(new Set(alone.logged.map(({ level, msg }) => `${level} ${String(msg)}`))).toEqual(
        new Set(['error claim failed; trying again after the poll interval']),
      );
    });

    it.each([
      { name: 'a serialization failure (40001)', error: databaseError('40001', 'ERROR') },
      { name: 'a deadlock (40P01)', error: databaseError('40P01', 'ERROR') },
    ])('that met a concurrent change, $name, is no error: logged at debug, and claimed again', async ({ error }) => {
      const lane = started(laneWith(failingOnce(error)));
      await waitFor(
        'a claim after the failed one',
        () => lane.statements.filter((name) => name === 'reliable_mail_claim').length > 1,
      );
      expect(lane.logged).toEqual([{ level: 'debug', msg: 'claim met a concurrent change' }]);
    });

    it.each([
      { name: 'whose answer never came', error: new Error('Query read timeout') },
      { name: 'whose connection ended under it', error: new Error('Connection terminated unexpectedly') },
      { name: 'whose session was terminated (FATAL)', error: databaseError('57P01', 'FATAL') },
    ])('$name may have committed: its rows are handed back', async ({ error }) => {
      const { statements } = started(laneWith(failingOnce(error)));
      await waitFor('the hand-back', () => statements.includes('reliable_mail_release_unanswered'));
    });
  });

  it('a row whose settle decision throws is logged and left to its lease, never a rejected promise', async () => {
    let claimed = false;
    const oneRow: Answer = (statement) => {
      if (statement !== 'reliable_mail_claim' || claimed) return undefined;
      claimed = true;
      return Promise.resolve([claimRecord('first')]);
    };
    // The outage's event names the recipients still waiting, which a row without a payload cannot say.
    const outage: AttemptResult = { kind: 'outage', replyCode: 421, enhancedStatus: null, reply: '421 4.3.2 bye' };
    const lane = started(laneWith(oneRow, outage));
    await waitFor('the send', () => lane.sends.length === 1);
    lane.sends.shift()!();
    await waitFor('the throw logged', () => lane.logged.length > 0);
    expect(lane.logged).toContainEqual({
      level: 'error',
      msg: 'the send of a row threw; a row left unsettled is claimed again after its lease',
    });
    expect(lane.statements).not.toContain('reliable_mail_settle');
  });

  it("a mail's wake-up claims before the event loop turns again, ahead of the I/O callbacks waiting in this turn", async () => {
    const lane = started(laneWith(() => undefined));
    const claims = () => lane.statements.filter((name) => name === 'reliable_mail_claim').length;
    await waitFor('the first poll', () => claims() > 0);
    const before = claims();
    // Three NOTIFYs read at once: one claim.
    for (let notify = 0; notify < 3; notify++) lane.loop.wake();
    // Microtasks only: no timer, immediate or I/O callback runs until they are done.
    for (let turn = 0; turn < 50; turn++) await Promise.resolve();
    expect(claims()).toBe(before + 1);
  });

  it('a quota settle that fails costs only its grants: the rows claimed are still handled', async () => {
    let claimed = false;
    // A row closed at its claim (all its recipients suppressed) sends nothing: its grant goes back.
    const oneRow: Answer = (statement) => {
      if (statement !== 'reliable_mail_claim' || claimed) return undefined;
      claimed = true;
      return Promise.resolve([{ ...claimRecord('first'), skip_reason: 'suppressed', attempt_id: null }]);
    };
    const quota = {
      take: async (wanted: number) => ({ granted: wanted, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: 0 }),
      settle: () => Promise.reject(new Error('Query read timeout')),
      counts: 'messages',
      pauseFor: async () => undefined,
      state: () => ({ limits: { perSecond: 20, perDay: null } }),
    } as unknown as SharedSendQuota;
    const lane = started(laneWith(oneRow, accepted, quota));
    await waitFor('the settle to fail', () => lane.logged.some(({ msg }) => msg === 'could not settle the quota'));
    expect(lane.logged.map(({ msg }) => msg)).not.toContain('claim failed; trying again after the poll interval');
    expect(lane.settled).toEqual(['first']);
  });

  describe('an idle lane with a quota takes no grant at its polls while no row is due', () => {
    /** Nothing is ever due: every claim finds no row, and every ask says so. */
    const nothingDue: Answer = (statement) =>
      statement === 'reliable_mail_any_due' ? Promise.resolve([{ due: false }]) : undefined;
    function countingQuota() {
      const takes: number[] = [];
      const quota = {
        take: async (wanted: number) => {
          takes.push(wanted);
          return { granted: wanted, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: 0 };
        },
        settle: async () => undefined,
        counts: 'messages',
        pauseFor: async () => undefined,
        state: () => ({ limits: { perSecond: 20, perDay: null } }),
      } as unknown as SharedSendQuota;
      return { quota, takes };
    }
    const count = (statements: string[], name: string) => statements.filter((statement) => statement === name).length;

    it('after a claim that found no row, each poll asks whether one is due and takes nothing', async () => {
      const { quota, takes } = countingQuota();
      const lane = started(laneWith(nothingDue, accepted, quota));
      await waitFor('three polls', () => count(lane.statements, 'reliable_mail_any_due') >= 3);
      expect(takes).toHaveLength(1);
      expect(count(lane.statements, 'reliable_mail_claim')).toBe(1);
    });

    it('a poll that finds a row due takes a grant and claims', async () => {
      const { quota, takes } = countingQuota();
      let due = false;
      const dueLater: Answer = (statement) =>
        statement === 'reliable_mail_any_due' ? Promise.resolve([{ due }]) : undefined;
      const lane = started(laneWith(dueLater, accepted, quota));
      await waitFor('a poll that asked', () => count(lane.statements, 'reliable_mail_any_due') >= 1);
      due = true;
      await waitFor('a second claim', () => count(lane.statements, 'reliable_mail_claim') >= 2);
      expect(takes.length).toBeGreaterThanOrEqual(2);
    });

    it("a wake-up (an enqueue's NOTIFY) takes and claims without asking", async () => {
      const { quota, takes } = countingQuota();
      const lane = started(laneWith(nothingDue, accepted, quota));
      await waitFor('a poll that asked', () => count(lane.statements, 'reliable_mail_any_due') >= 1);
      expect(takes).toHaveLength(1);
      // The ask still says no row is due: only the wake-up's claim takes.
      lane.loop.wake();
      await waitFor('the take of the wake-up', () => takes.length === 2);
      await waitFor('its claim', () => count(lane.statements, 'reliable_mail_claim') === 2);
    });

    it('an ask that fails (the database away) takes nothing and asks again at the next poll', async () => {
      const { quota, takes } = countingQuota();
      let asks = 0;
      const askFailsTwice: Answer = (statement) => {
        if (statement !== 'reliable_mail_any_due') return undefined;
        asks += 1;
        return asks <= 2
          ? Promise.reject(new Error('Connection terminated unexpectedly'))
          : Promise.resolve([{ due: true }]);
      };
      const lane = started(laneWith(askFailsTwice, accepted, quota));
      await waitFor('a take after the ask answered', () => takes.length === 2);
      // The two failed asks took nothing: the first take was the start's, the second followed the third ask.
      expect(asks).toBe(3);
      expect(
        lane.logged.filter(({ msg }) => msg === 'claim failed; trying again after the poll interval'),
      ).toHaveLength(2);
    });
  });

  describe('a quota is settled with what the claimed rows cost, as its provider counts', () => {
    const to = (...addresses: string[]) => addresses.map((address) => ({ address }));
    const rows = [
      // Five recipients, one of whom took the mail in an earlier attempt and one on the suppression list: 3 left.
      {
        ...claimRecord('five'),
        payload: {
          to: to('a@example.com', 'b@example.com'),
          cc: to('c@example.com'),
          bcc: to('d@example.com', 'e@example.com'),
        },
        accepted_recipients: ['b@example.com'],
        suppressed: ['e@example.com'],
      },
      { ...claimRecord('one'), payload: { to: to('f@example.com'), cc: [], bcc: [] } },
      { ...claimRecord('closed'), skip_reason: 'cancelled', attempt_id: null },
    ];
    const limited = { perSecond: 20, perDay: null };
    it.each([
      { counts: 'recipients', granted: 5, limits: limited, used: 4, released: [] },
      // The second row does not fit in what is left of 2 once the first took 3: it goes back to the queue.
      { counts: 'recipients', granted: 2, limits: limited, used: 3, released: ['one'] },
      // No limit in force (the provider's unread): the take granted what was asked, and every row goes.
      { counts: 'recipients', granted: 3, limits: { perSecond: null, perDay: null }, used: 4, released: [] },
      { counts: 'messages', granted: 4, limits: limited, used: 2, released: [] },
    ])('counted in $counts, $granted granted: $used used', async ({ counts, granted, limits, used, released }) => {
      let claimed = false;
      const threeRows: Answer = (statement, values) => {
        if (statement !== 'reliable_mail_claim' || claimed) return undefined;
        claimed = true;
        return Promise.resolve(rows.slice(0, values[1] as number));
      };
      const settled: number[] = [];
      const quota = {
        take: async () => ({ granted, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: 0 }),
        settle: async (_take: unknown, charged: number) => void settled.push(charged),
        counts,
        pauseFor: async () => undefined,
        state: () => ({ limits }),
      } as unknown as SharedSendQuota;
      const lane = started(laneWith(threeRows, accepted, quota));
      await waitFor('the claim to be settled', () => settled.length > 0);
      expect(settled[0]).toBe(used);
      expect(lane.released).toEqual(released);
    });
  });

  it('a hand-back of the rows past the grant that fails leaves them to their lease; the kept row is sent', async () => {
    let claimed = false;
    const to = (id: string) => [{ address: `a-${id}@example.com` }, { address: `b-${id}@example.com` }];
    const twoRows: Answer = (statement) => {
      if (statement === 'reliable_mail_release') return Promise.reject(new Error('Query read timeout'));
      if (statement !== 'reliable_mail_claim' || claimed) return undefined;
      claimed = true;
      return Promise.resolve(
        ['first', 'second'].map((id) => ({ ...claimRecord(id), payload: { to: to(id), cc: [], bcc: [] } })),
      );
    };
    const quota = {
      take: async () => ({ granted: 2, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: 0 }),
      settle: async () => undefined,
      counts: 'recipients',
      pauseFor: async () => undefined,
      state: () => ({ limits: { perSecond: 20, perDay: null } }),
    } as unknown as SharedSendQuota;
    const lane = started(laneWith(twoRows, accepted, quota));
    await waitFor('the first row sent', () => lane.delivered.length === 1);
    expect(lane.delivered).toEqual(['first']);
    expect(lane.logged).toContainEqual({
      level: 'warn',
      msg: 'could not hand back the rows past the quota; they are claimed again after the lease',
    });
  });

  describe('a claim takes the rows its grant covers at what rows have cost of late', () => {
    const fourEach = (id: string) => ({
      ...claimRecord(id),
      payload: { to: ['a', 'b', 'c', 'd'].map((name) => ({ address: `${name}-${id}@example.com` })), cc: [], bcc: [] },
    });
    it.each([
      // 8 granted: 2 rows of 4 kept, the rest handed back; 4 a row of late (1 → 1.75) makes the next claim 4 rows.
      { name: 'with a limit', limits: { perSecond: 20, perDay: null }, claimLimits: [8, 4] },
      { name: 'with none in force', limits: { perSecond: null, perDay: null }, claimLimits: [8, 8] },
    ])('$name', async ({ limits, claimLimits }) => {
      const asked: number[] = [];
      const twoClaims: Answer = (statement, values) => {
        if (statement !== 'reliable_mail_claim' || asked.length === 2) return undefined;
        const limit = values[1] as number;
        asked.push(limit);
        return Promise.resolve(Array.from({ length: limit }, (_, index) => fourEach(`${asked.length}-${index}`)));
      };
      const quota = {
        take: async () => ({ granted: 8, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: 0 }),
        settle: async () => undefined,
        counts: 'recipients',
        pauseFor: async () => undefined,
        state: () => ({ limits }),
      } as unknown as SharedSendQuota;
      const lane = started(laneWith(twoClaims, accepted, quota));
      // Every send ends at once, so that the lane claims again.
      const ending = setInterval(() => lane.sends.splice(0).forEach((end) => end()), 1);
      try {
        await waitFor('two claims', () => asked.length === 2);
      } finally {
        clearInterval(ending);
      }
      expect(asked).toEqual(claimLimits);
    });
  });

  describe('a rate-limited lane', () => {
    const oneRow = (): Answer => {
      let claimed = false;
      return (statement) => {
        if (statement !== 'reliable_mail_claim' || claimed) return undefined;
        claimed = true;
        return Promise.resolve([
          { ...claimRecord('first'), payload: { to: [{ address: 'a@example.com' }], cc: [], bcc: [] } },
        ]);
      };
    };
    /** A quota whose every take grants all it is asked for, its sends to start `inMs` after the take. */
    const quotaStartingIn = (inMs: number, startsGiven: number[] = []) =>
      ({
        take: async (wanted: number) => {
          startsGiven.push(Date.now() + inMs);
          return { granted: wanted, takenAtMs: 0, waitMs: 0, shortBy: null, sendsStartAt: startsGiven.at(-1) };
        },
        settle: async () => undefined,
        counts: 'messages',
        pauseFor: async () => undefined,
        state: () => ({ limits: { perSecond: 20, perDay: null } }),
      }) as unknown as SharedSendQuota;

    it("starts a row's send at its grant's time, not as soon as the row is in hand", async () => {
      // The start each take gives its grant: the row is claimed under the first.
      const startsGiven: number[] = [];
      const lane = started(laneWith(oneRow(), accepted, quotaStartingIn(100, startsGiven)));
      await waitFor('the send', () => lane.delivered.length === 1);
      expect(lane.startedAt[0]).toBeGreaterThanOrEqual(startsGiven[0]);
    });

    it('holds a row no longer than GRANT_TO_SEND_MS, whatever start the take gave (a clock stepped back)', async () => {
      const lane = started(laneWith(oneRow(), accepted, quotaStartingIn(60_000)));
      await waitFor('the send', () => lane.delivered.length === 1);
    });

    it('hands a held row back at shutdown, unsent', async () => {
      const lane = laneWith(oneRow(), accepted, quotaStartingIn(GRANT_TO_SEND_MS));
      lane.loop.start();
      await waitFor('the claim', () => lane.statements.includes('reliable_mail_claim'));
      await lane.loop.stop(1_000);
      expect(lane.statements).toContain('reliable_mail_release');
      expect(lane.delivered).toEqual([]);
    });
  });

  describe('a row claimed ahead', () => {
    /** Two rows claimed at once; the second waits in memory for the first's send to end. */
    const twoRows = (extendLease: () => Promise<unknown[]>): Answer => {
      let claimed = false;
      return (statement) => {
        if (statement === 'reliable_mail_extend_lease') return extendLease();
        if (statement !== 'reliable_mail_claim' || claimed) return undefined;
        claimed = true;
        return Promise.resolve([claimRecord('first'), claimRecord('second')]);
      };
    };

    it('whose lease would no longer hold a whole send and its settle is renewed before its send', async () => {
      const lane = started(laneWith(twoRows(() => Promise.resolve([{ id: 'second' }]))));
      await waitFor('the first send', () => lane.delivered.length === 1);
      // Past the point where the second row's lease no longer holds a whole send and its settle.
      await wait(1_000);
      lane.sends.shift()!();
      await waitFor('the second send', () => lane.delivered.length === 2);
      expect(lane.statements).toContain('reliable_mail_extend_lease');
      expect(lane.delivered).toEqual(['first', 'second']);
    });

    it("in a lane draining a backlog, a mail's wake-up waits for the next turn, where the slots freed in this one share its claim", async () => {
      const lane = started(laneWith(twoRows(() => Promise.resolve([]))));
      const claims = () => lane.statements.filter((name) => name === 'reliable_mail_claim').length;
      await waitFor('the first send', () => lane.delivered.length === 1);
      const before = claims();
      // The first send ends: the second row takes its slot, and the row claimed ahead leaves room for one more.
      lane.sends.shift()!();
      for (let turn = 0; turn < 50; turn++) await Promise.resolve();
      expect(lane.delivered).toEqual(['first', 'second']);
      lane.loop.wake();
      for (let turn = 0; turn < 50; turn++) await Promise.resolve();
      expect(claims()).toBe(before);
      await waitFor('the claim of the room freed', () => claims() > before);
    });

    it('whose renewal fails is not sent when a whole send and its settle no longer fit in its lease', async () => {
      const lane = started(laneWith(twoRows(() => Promise.reject(new Error('Query read timeout')))));
      await waitFor('the first send', () => lane.delivered.length === 1);
      await wait(1_000);
      lane.sends.shift()!();
      await waitFor('the renewal', () => lane.statements.includes('reliable_mail_extend_lease'));
      await wait(50);
      expect(lane.delivered).toEqual(['first']);
    });
  });
});
