import { describe, expect, it } from '@jest/globals';
import { type DispatchTally, summaryOf } from './dispatch-summary.js';
import type { LanePause } from './lane-throttle.js';

const t0 = 1_000_000;
const none: DispatchTally = { attempts: {}, deadLettered: 0 };
const running = { default: null, bulk: null };
const outage: LanePause = { until: new Date(t0 + 8_000), reason: 'outage', repeats: 4 };

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
      name: 'mail sent and one deferred: a line at log level',
      tally: { attempts: { sent: 98, transient: 1 }, deadLettered: 0 },
      lanes: running,
      unavailableSince: null,
      expected: { level: 'log', entry: { msg: 'mail in the last 60 s', attempts: { sent: 98, transient: 1 } } },
    },
    {
      name: 'a dead letter',
      tally: { attempts: { transient: 1 }, deadLettered: 1 },
      lanes: running,
      unavailableSince: null,
      expected: {
        level: 'log',
        entry: { msg: 'mail in the last 60 s', attempts: { transient: 1 }, deadLettered: 1 },
      },
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
