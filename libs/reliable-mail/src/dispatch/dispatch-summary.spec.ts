import { describe, expect, it } from '@jest/globals';
import { type DispatchTally, summaryOf } from './dispatch-summary.js';
import type { LanePause } from './lane-throttle.js';

const t0 = 1_000_000;
const none: DispatchTally = { attempts: {}, lastReplies: {}, deadLettered: 0 };
const running = { default: null, bulk: null };
const outage: LanePause = { until: new Date(t0 + 8_000), reason: 'outage', repeats: 4 };
const greylisted = {
  replyCode: 451,
  enhancedStatus: '4.7.1',
  reply: '451 4.7.1 <user39@example.com>: Recipient address rejected: greylisted, try again later',
};
const greylistedShown = {
  replyCode: 451,
  enhancedStatus: '4.7.1',
  reply: '451 4.7.1 <[address]>: Recipient address rejected: greylisted, try again later',
};

describe('summaryOf', () => {
  it.each<{
    name: string;
    tally: DispatchTally;
    lanes: Record<string, LanePause | null>;
    unavailableSince: number | null;
    expected: unknown;
  }>([
    { name: 'idle and healthy: no line', tally: none, lanes: running, unavailableSince: null, expected: null },
    {
      name: 'mail sent and one deferred: a line at log level, with the reply of the deferral, its address taken out',
      tally: { attempts: { sent: 98, transient: 1 }, lastReplies: { transient: greylisted }, deadLettered: 0 },
      lanes: running,
      unavailableSince: null,
      expected: {
        level: 'log',
        entry: {
          msg: 'mail in the last 60 s',
          attempts: { sent: 98, transient: 1 },
          lastReplies: { transient: greylistedShown },
        },
      },
    },
    {
      name: 'a server deferring every mail, which pauses no lane: a line at warn level, with its last reply',
      tally: { attempts: { transient: 40 }, lastReplies: { transient: greylisted }, deadLettered: 0 },
      lanes: running,
      unavailableSince: null,
      expected: {
        level: 'warn',
        entry: {
          msg: 'mail in the last 60 s',
          attempts: { transient: 40 },
          lastReplies: { transient: greylistedShown },
        },
      },
    },
    {
      name: 'refusals and deferrals beside mail that some recipients took: log level, the last reply of each',
      tally: {
        attempts: { partial: 2, permanent: 1, transient: 1 },
        lastReplies: {
          partial: greylisted,
          permanent: { replyCode: 550, enhancedStatus: '5.1.1', reply: '550 5.1.1 no such user' },
          transient: { replyCode: null, enhancedStatus: null, reply: 'connection closed' },
        },
        deadLettered: 0,
      },
      lanes: running,
      unavailableSince: null,
      expected: {
        level: 'log',
        entry: {
          msg: 'mail in the last 60 s',
          attempts: { partial: 2, permanent: 1, transient: 1 },
          lastReplies: {
            partial: greylistedShown,
            permanent: { replyCode: 550, enhancedStatus: '5.1.1', reply: '550 5.1.1 no such user' },
            transient: { replyCode: null, enhancedStatus: null, reply: 'connection closed' },
          },
        },
      },
    },
    {
      name: 'a dead letter out of attempts, nothing sent: warn level',
      tally: { attempts: { transient: 1 }, lastReplies: { transient: greylisted }, deadLettered: 1 },
      lanes: running,
      unavailableSince: null,
      expected: {
        level: 'warn',
        entry: {
          msg: 'mail in the last 60 s',
          attempts: { transient: 1 },
          lastReplies: { transient: greylistedShown },
          deadLettered: 1,
        },
      },
    },
    {
      name: 'a mail dead-lettered at its claim (no attempt) beside mail sent: log level',
      tally: { attempts: { sent: 3 }, lastReplies: {}, deadLettered: 1 },
      lanes: running,
      unavailableSince: null,
      expected: { level: 'log', entry: { msg: 'mail in the last 60 s', attempts: { sent: 3 }, deadLettered: 1 } },
    },
    {
      name: 'a lane probing its server through an outage, nothing sent: a line at warn level',
      tally: none,
      lanes: { default: null, bulk: outage },
      unavailableSince: null,
      expected: {
        level: 'warn',
        entry: {
          msg: 'mail in the last 60 s',
          attempts: {},
          pausedLanes: { bulk: { reason: 'outage', failedProbes: 3 } },
        },
      },
    },
    {
      name: 'the database unavailable for two minutes: recalled',
      tally: none,
      lanes: running,
      unavailableSince: t0 - 120_000,
      expected: {
        level: 'warn',
        entry: { msg: 'mail in the last 60 s', attempts: {}, databaseUnavailableForMs: 120_000 },
      },
    },
  ])('$name', ({ tally, lanes, unavailableSince, expected }) => {
    expect(summaryOf(tally, lanes, unavailableSince, 60_000, t0)).toEqual(expected);
  });
});
