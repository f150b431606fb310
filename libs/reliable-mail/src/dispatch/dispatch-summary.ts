import type { LanePause } from './lane-throttle.js';
import { loggedReply, type ReplyFacts } from '../shared/logged-reply.js';

/** What the dispatcher did since its last summary (`MailMetrics.takeTally`). */
export interface DispatchTally {
  /** Attempts by outcome: sent, partial, transient, permanent, outage, unknown. */
  attempts: Record<string, number>;
  /** The reply of the last attempt of each outcome but `sent`: what the server said of the mail it did not take. */
  lastReplies: Record<string, ReplyFacts>;
  deadLettered: number;
}

export interface DispatchSummary {
  /**
   * `warn` while a lane is paused or the database unavailable, and for an interval in which mail failed and none went
   * out (a server deferring every mail pauses no lane); `log` otherwise.
   */
  level: 'log' | 'warn';
  entry: Record<string, unknown>;
}

/** Outcomes in which some recipient took the mail. */
const DELIVERED = ['sent', 'partial'];

/**
 * The one line the dispatcher logs per `logging.summaryIntervalMs` in place of a line per mail: what was attempted
 * and dead-lettered in the interval, with the last reply of each outcome that failed (see `loggedReply`), and what is
 * still wrong at its end (a lane paused or probing, the database unavailable, and for how long), so that a long outage
 * is recalled at each interval rather than once at its start. Null when the interval saw no attempt and nothing is
 * wrong: an idle, healthy instance logs nothing.
 */
export function summaryOf(
  tally: DispatchTally,
  lanes: Record<string, LanePause | null>,
  databaseUnavailableSince: number | null,
  intervalMs: number,
  now: number,
): DispatchSummary | null {
  const pausedLanes = Object.fromEntries(
    Object.entries(lanes)
      .filter((entry): entry is [string, LanePause] => entry[1] !== null)
      .map(([name, pause]) => [name, { reason: pause.reason, failedProbes: pause.repeats - 1 }]),
  );
  const somethingWrong = Object.keys(pausedLanes).length > 0 || databaseUnavailableSince !== null;
  const attempted = Object.keys(tally.attempts).length > 0 || tally.deadLettered > 0;
  if (!attempted && !somethingWrong) return null;
  const failed = Object.keys(tally.attempts).some((outcome) => outcome !== 'sent') || tally.deadLettered > 0;
  const delivered = DELIVERED.some((outcome) => (tally.attempts[outcome] ?? 0) > 0);
  const lastReplies = Object.entries(tally.lastReplies).map(([outcome, reply]) => [outcome, loggedReply(reply)]);
  return {
    level: somethingWrong || (failed && !delivered) ? 'warn' : 'log',
    entry: {
      msg: `mail in the last ${Math.round(intervalMs / 1000)} s`,
      attempts: tally.attempts,
      ...(lastReplies.length > 0 && { lastReplies: Object.fromEntries(lastReplies) }),
      ...(tally.deadLettered > 0 && { deadLettered: tally.deadLettered }),
      ...(Object.keys(pausedLanes).length > 0 && { pausedLanes }),
      ...(databaseUnavailableSince !== null && { databaseUnavailableForMs: now - databaseUnavailableSince }),
    },
  };
}
