import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { InstanceLaneState } from '../console/console-data.types.js';
import { DatabaseAvailability } from '../database/database-availability.js';
import type { SqlClient } from '../database/sql-client.js';
import { heartbeatDue, InstanceHeartbeat, type LaneView, laneStateOf } from './instance-heartbeat.js';
import type { LanePause } from './lane-throttle.js';

const t0 = 1_000_000;
const HEARTBEAT_MS = 10_000;

const running: InstanceLaneState = { state: 'running', reason: null, until: null, inFlight: 0 };
const outage: InstanceLaneState = {
  state: 'outage',
  reason: 'outage',
  until: new Date(t0 + 2_000).toISOString(),
  inFlight: 0,
};

const lane = (pausedFor: LanePause | null, sendsInFlight = 0): LaneView => ({ pausedFor, sendsInFlight });

describe('laneStateOf', () => {
  it.each<{ name: string; pause: LanePause | null; expected: Omit<InstanceLaneState, 'inFlight'> }>([
    { name: 'a lane never paused runs', pause: null, expected: { state: 'running', reason: null, until: null } },
    {
      name: 'a lane whose server refused the session is in outage until its pause ends',
      pause: { until: new Date(t0 + 1), reason: 'outage', repeats: 3 },
      expected: { state: 'outage', reason: 'outage', until: new Date(t0 + 1).toISOString() },
    },
    {
      name: 'a lane asked to slow down is paused',
      pause: { until: new Date(t0 + 5_000), reason: 'slow-down', repeats: 1 },
      expected: { state: 'paused', reason: 'slow-down', until: new Date(t0 + 5_000).toISOString() },
    },
    {
      name: 'a lane paused by connection failures is paused',
      pause: { until: new Date(t0 + 1_000), reason: 'connection-failure', repeats: 1 },
      expected: { state: 'paused', reason: 'connection-failure', until: new Date(t0 + 1_000).toISOString() },
    },
    {
      name: 'a lane whose pause is over runs again, probing (as the health indicator has it)',
      pause: { until: new Date(t0), reason: 'outage', repeats: 2 },
      expected: { state: 'running', reason: null, until: null },
    },
  ])('$name', ({ pause, expected }) => {
    expect(laneStateOf(lane(pause, 3), t0)).toEqual({ ...expected, inFlight: 3 });
  });
});

describe('heartbeatDue', () => {
  it('writes at the start and then every heartbeatMs while nothing changes', () => {
    expect(heartbeatDue(null, { default: running }, t0, HEARTBEAT_MS)).toBe(true);
    const last = { at: t0, lanes: { default: running } };
    expect(heartbeatDue(last, { default: running }, t0 + HEARTBEAT_MS - 1, HEARTBEAT_MS)).toBe(false);
    expect(heartbeatDue(last, { default: running }, t0 + HEARTBEAT_MS, HEARTBEAT_MS)).toBe(true);
  });

  it("writes a lane's change at once, but never within a second of the last write", () => {
    const last = { at: t0, lanes: { default: running, bulk: running } };
    const changed = { default: outage, bulk: running };
    expect(heartbeatDue(last, changed, t0 + 999, HEARTBEAT_MS)).toBe(false);
    expect(heartbeatDue(last, changed, t0 + 1_000, HEARTBEAT_MS)).toBe(true);
    // A longer pause of the same outage says when the lane tries again: written too.
    const later = { default: outage, bulk: running };
    const longer = { default: { ...outage, until: new Date(t0 + 6_000).toISOString() }, bulk: running };
    expect(heartbeatDue({ at: t0, lanes: later }, longer, t0 + 1_000, HEARTBEAT_MS)).toBe(true);
  });

  it('leaves the sends in flight, which change with every mail, to the interval', () => {
    const last = { at: t0, lanes: { default: running } };
    expect(heartbeatDue(last, { default: { ...running, inFlight: 5 } }, t0 + 5_000, HEARTBEAT_MS)).toBe(false);
  });

  it('after a failed write waits the whole interval, whatever changed', () => {
    const failed = { at: t0, lanes: null };
    expect(heartbeatDue(failed, { default: outage }, t0 + 5_000, HEARTBEAT_MS)).toBe(false);
    expect(heartbeatDue(failed, { default: outage }, t0 + HEARTBEAT_MS, HEARTBEAT_MS)).toBe(true);
  });
});

describe('InstanceHeartbeat', () => {
  /**
   * A database that is down until `up` is set, and records the heartbeats it took; with `availability`, it reports
   * its outage as OutboxDatabase does.
   */
  function flakyDatabase(availability?: DatabaseAvailability) {
    const written: unknown[][] = [];
    const state = { up: false };
    const database: SqlClient = {
      query<R>(_statement: unknown, values: readonly unknown[]): Promise<R[]> {
        if (!state.up) {
          const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
            code: 'ECONNREFUSED',
            errno: -111,
          });
          availability?.failed(error, Date.now());
          return Promise.reject(error);
        }
        written.push([...values]);
        return Promise.resolve([]);
      },
    };
    return { database, written, state };
  }

  function recordingLogger() {
    const lines: Array<{ level: string; message: unknown }> = [];
    const logger = {
      log: (message: unknown) => lines.push({ level: 'log', message }),
      warn: (message: unknown) => lines.push({ level: 'warn', message }),
      error: (message: unknown) => lines.push({ level: 'error', message }),
    } as unknown as Logger;
    return { logger, lines };
  }

  /** The heartbeat of worker-1 with one running lane, on the clock given. */
  function runningLaneHeartbeat(database: SqlClient, logger: Logger, clock: () => number): InstanceHeartbeat {
    return new InstanceHeartbeat(
      database,
      new SchedulerRegistry(),
      { id: 'worker-1', host: 'host', pid: 42 },
      HEARTBEAT_MS,
      new Map([['default', lane(null)]]),
      logger,
      clock,
    );
  }

  it('warns once per outage of the database, not at every heartbeat, and says when it is written again', async () => {
    const { database, written, state } = flakyDatabase();
    const { logger, lines } = recordingLogger();
    let now = t0;
    const heartbeat = runningLaneHeartbeat(database, logger, () => now);
    for (let beat = 0; beat < 5; beat++, now += HEARTBEAT_MS) await heartbeat.beat();
    expect(lines.map((line) => line.level)).toEqual(['warn']);
    expect(written).toEqual([]);

    state.up = true;
    await heartbeat.beat();
    expect(lines.map((line) => line.level)).toEqual(['warn', 'log']);
    expect(written).toHaveLength(1);
    expect(written[0].slice(0, 3)).toEqual(['worker-1', 'host', 42]);
    expect(JSON.parse(written[0][4] as string)).toEqual({ default: running });

    state.up = false;
    now += HEARTBEAT_MS;
    await heartbeat.beat();
    expect(lines.map((line) => line.level)).toEqual(['warn', 'log', 'warn']);
  });

  it('says nothing of a failed write when the outage of the database was logged as such', async () => {
    const { database, written, state } = flakyDatabase(new DatabaseAvailability());
    const { logger, lines } = recordingLogger();
    let now = t0;
    const heartbeat = runningLaneHeartbeat(database, logger, () => now);
    for (let beat = 0; beat < 5; beat++, now += HEARTBEAT_MS) await heartbeat.beat();
    state.up = true;
    await heartbeat.beat();
    expect(written).toHaveLength(1);
    expect(lines).toEqual([]);
  });
});
