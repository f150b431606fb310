import { describe, expect, it } from '@jest/globals';
import { paceAfter, type RelayRound } from './relay-pace.js';

const round = (claimed: number, confirmed: number, firstTries: number): RelayRound => ({
  claimed,
  confirmed,
  firstTries,
});

describe('paceAfter', () => {
  it.each([
    ['a full batch, all confirmed: more are due', round(100, 100, 100), 0, false, { failedRounds: 0, next: 'now' }],
    ['part of a batch confirmed', round(40, 39, 40), 0, false, { failedRounds: 0, next: 'poll' }],
    ['part of a batch, events committed meanwhile', round(40, 40, 40), 0, true, { failedRounds: 0, next: 'now' }],
    ['nothing due', round(0, 0, 0), 0, false, { failedRounds: 0, next: 'poll' }],
    ['nothing due ends an outage', round(0, 0, 0), 3, false, { failedRounds: 0, next: 'poll' }],
    ['nothing due, events committed meanwhile', round(0, 0, 0), 0, true, { failedRounds: 0, next: 'now' }],
    ['new events refused: the broker is down', round(10, 0, 10), 0, false, { failedRounds: 1, next: 'backoff' }],
    ['still down', round(10, 0, 2), 4, true, { failedRounds: 5, next: 'backoff' }],
    ['the database failed the round', null, 1, false, { failedRounds: 2, next: 'backoff' }],
    ['only an event refused before, refused again', round(1, 0, 0), 0, false, { failedRounds: 0, next: 'poll' }],
    ['the same, events committed meanwhile', round(1, 0, 0), 0, true, { failedRounds: 0, next: 'now' }],
    ['only events refused before, during an outage', round(5, 0, 0), 2, false, { failedRounds: 2, next: 'backoff' }],
    ['a confirmation ends the outage', round(5, 1, 0), 6, false, { failedRounds: 0, next: 'poll' }],
  ] as const)('%s', (_case, result, failedRounds, due, expected) => {
    expect(paceAfter(result, failedRounds, 100, due)).toEqual(expected);
  });
});
