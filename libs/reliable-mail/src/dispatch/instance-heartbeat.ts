import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { InstanceLaneState } from '../console/console-data.types.js';
import { reportedAsOutage } from '../database/database-availability.js';
import type { SqlClient } from '../database/sql-client.js';
import { removeInstance, writeHeartbeat } from '../outbox/sql/instances.js';
import { DISPATCHER_TIMEOUT_NAME } from '../reliable-mail.constants.js';
import { RecurringTask } from '../shared/recurring-task.js';
import type { LanePause } from './lane-throttle.js';

const HEARTBEAT_TIMER = `${DISPATCHER_TIMEOUT_NAME}:heartbeat`;

/**
 * The least time between two writes, and how often the lanes are looked at: a lane that pauses or resumes shows
 * within about this long, and one that flaps costs a write a second at most.
 */
export const SHORTEST_WRITE_GAP_MS = 1_000;

/** What the heartbeat reads of a lane's loop (`LaneLoop`), which holds its state. */
export interface LaneView {
  readonly pausedFor: LanePause | null;
  readonly sendsInFlight: number;
}

/**
 * A lane's state as the console shows it. As in the health indicator, a lane whose pause is over counts as running,
 * although it sends one mail at a time until one goes through: an idle lane may stay so for good.
 */
export function laneStateOf(lane: LaneView, now: number): InstanceLaneState {
  const pause = lane.pausedFor;
  if (pause === null || pause.until.getTime() <= now)
    return { state: 'running', reason: null, until: null, inFlight: lane.sendsInFlight };
  return {
    state: pause.reason === 'outage' ? 'outage' : 'paused',
    reason: pause.reason,
    until: pause.until.toISOString(),
    inFlight: lane.sendsInFlight,
  };
}

/** The last write: when it was tried, and the lanes it wrote, null when it failed. */
export interface LastWrite {
  at: number;
  lanes: Record<string, InstanceLaneState> | null;
}

/**
 * Whether to write the heartbeat now: at the start, every `heartbeatMs`, and after a lane's state changed (but not
 * within `SHORTEST_WRITE_GAP_MS` of the last write). Sends in flight change with every mail, so the interval alone
 * writes them. After a failed write the database is left alone for a whole interval, whatever changed.
 */
export function heartbeatDue(
  last: LastWrite | null,
  lanes: Record<string, InstanceLaneState>,
  now: number,
  heartbeatMs: number,
): boolean {
  if (last === null) return true;
  const since = now - last.at;
  if (since >= heartbeatMs) return true;
  if (last.lanes === null || since < SHORTEST_WRITE_GAP_MS) return false;
  return statesOf(last.lanes) !== statesOf(lanes);
}

const statesOf = (lanes: Record<string, InstanceLaneState>): string =>
  JSON.stringify(Object.entries(lanes).map(([name, { state, reason, until }]) => [name, state, reason, until]));

export interface InstanceIdentity {
  /** `dispatcher.workerId`. */
  id: string;
  host: string;
  pid: number;
}

/**
 * Keeps this instance's row in the instance table: its heartbeat and each lane's state, for the console. A failed
 * write is warned of once until a write goes through again (not at all when it failed with an outage of the database
 * logged as such) and otherwise changes nothing: the lanes never wait for it, and the console shows the instance as
 * stale until a write goes through. Shutdown deletes the row; a crashed
 * instance's row stays, stale, until another instance's heartbeat deletes it a day later.
 */
export class InstanceHeartbeat {
  private readonly task: RecurringTask;
  private readonly startedAt = new Date();
  private last: LastWrite | null = null;
  /** The write under way, if any: shutdown waits for it, since it would write back the row deleted before it ends. */
  private writing: Promise<void> | null = null;
  /** A failed write was warned of, and no write went through since: the next that does says so. */
  private warned = false;

  constructor(
    private readonly database: SqlClient,
    scheduler: SchedulerRegistry,
    private readonly instance: InstanceIdentity,
    private readonly heartbeatMs: number,
    private readonly lanes: ReadonlyMap<string, LaneView>,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {
    this.task = new RecurringTask(scheduler, HEARTBEAT_TIMER, SHORTEST_WRITE_GAP_MS, () => this.beat(), logger);
  }

  start(): void {
    this.task.start(0);
  }

  /** Writes the heartbeat if it is due (`heartbeatDue`). Never rejects. */
  async beat(): Promise<void> {
    const now = this.clock();
    const lanes = Object.fromEntries([...this.lanes].map(([name, lane]) => [name, laneStateOf(lane, now)]));
    if (!heartbeatDue(this.last, lanes, now, this.heartbeatMs)) return;
    this.writing = this.write(lanes, now);
    await this.writing;
  }

  private async write(lanes: Record<string, InstanceLaneState>, now: number): Promise<void> {
    try {
      await writeHeartbeat(this.database, {
        ...this.instance,
        startedAt: this.startedAt,
        heartbeatMs: this.heartbeatMs,
        lanes,
      });
      this.last = { at: now, lanes };
      if (this.warned) this.logger.log({ msg: 'the instance heartbeat is written again', instance: this.instance.id });
      this.warned = false;
    } catch (error) {
      // From when it failed: a write that hung for a statement's whole bound is not tried again at once.
      this.last = { at: this.clock(), lanes: null };
      if (!this.warned && !reportedAsOutage(error)) {
        this.logger.warn({
          msg: 'could not write the instance heartbeat; the console shows this instance as stale until it can',
          instance: this.instance.id,
          error: String(error),
        });
        this.warned = true;
      }
    }
  }

  /**
   * Stops the heartbeat and deletes the row, by `deadline` (epoch ms): a write still under way then is left to end,
   * and the row to go stale.
   */
  async stop(deadline: number): Promise<void> {
    this.task.stop();
    const timeLeft = () => deadline - Date.now();
    if (this.writing) {
      const written = this.writing.then(() => true);
      if (!(await Promise.race([written, sleep(Math.max(0, timeLeft()), false, { ref: false })]))) return;
    }
    try {
      await removeInstance(this.database, this.instance.id, { timeoutMs: timeLeft() });
    } catch (error) {
      this.logger.warn({
        msg: 'could not delete the instance row at shutdown; the console shows it as stale',
        instance: this.instance.id,
        error: String(error),
      });
    }
  }
}
