/** What one claim-and-publish round of a destination came to; null when its statements failed (the database). */
export interface RelayRound {
  claimed: number;
  confirmed: number;
  /** Of the claimed, those published for the first time: a broker that refuses these is down, not picky. */
  firstTries: number;
}

export interface RelayPace {
  /** Consecutive rounds that show the broker (or the database) down. */
  failedRounds: number;
  /**
   * `now`: claim again at once (a full batch, or events committed meanwhile); `poll`: wait for the poll interval or a
   * nudge; `backoff`: wait out the outage, deaf to nudges.
   */
  next: 'now' | 'poll' | 'backoff';
}

/**
 * How a destination's loop goes on after a round. An outage is a round that confirmed nothing though it held events
 * never published before, or whose statements failed; it pauses the loop, longer at each, until a round confirms
 * something or finds nothing due. A round whose failures were all of events published before (one the broker keeps
 * refusing, each due again after its own backoff) is no outage: the loop polls as usual, so that new events go by it.
 */
export function paceAfter(round: RelayRound | null, failedRounds: number, batchSize: number, due: boolean): RelayPace {
  if (round === null || (round.confirmed === 0 && round.firstTries > 0)) {
    return { failedRounds: failedRounds + 1, next: 'backoff' };
  }
  if (round.claimed === 0) return { failedRounds: 0, next: due ? 'now' : 'poll' };
  if (round.confirmed === 0) return { failedRounds, next: failedRounds > 0 ? 'backoff' : due ? 'now' : 'poll' };
  return { failedRounds: 0, next: round.claimed >= batchSize || due ? 'now' : 'poll' };
}
