import { InvalidOptionsError } from '../errors.js';
import type { LaneQuotaOptions, QuotaCounts } from './reliable-mail-options.interface.js';
import { LARGEST_OPTION } from './require.js';

/** A limit as configured: a number, read from the provider, or none. */
export type QuotaLimit = number | 'provider' | null;

export interface ResolvedLaneQuota {
  /** The row the limits are kept in, shared by the lanes that name it. */
  key: string;
  perSecond: QuotaLimit;
  perDay: QuotaLimit;
  counts: QuotaCounts;
}

const QUOTA_KEYS = new Set(['perSecond', 'perDay', 'key', 'counts']);
const COUNTS = new Set<unknown>(['recipients', 'messages'] satisfies QuotaCounts[]);
/** A key is written into every take; bounded so that a whole document given by mistake is caught. */
const LONGEST_KEY = 200;
/** SES's highest published rates are in the thousands a second; a million is a typo (or ms taken for seconds). */
const HIGHEST_RATE = 1_000_000;

/**
 * The lane's `quota`, or null for none. `'provider'` needs a transport that reports its limits (`sendQuota`): an SMTP
 * server, or a provider object without it, tells nothing, and the lane would otherwise run without the limits the
 * option asks for.
 */
export function resolveQuota(
  lane: string,
  quota: LaneQuotaOptions | 'provider' | undefined,
  reportsQuota: boolean,
): ResolvedLaneQuota | null {
  if (quota === undefined) return null;
  const option = `lanes.${lane}.quota`;
  const given: LaneQuotaOptions = quota === 'provider' ? { perSecond: 'provider', perDay: 'provider' } : quota;
  if (!given || typeof given !== 'object' || Array.isArray(given)) {
    throw new InvalidOptionsError(
      option,
      `must be 'provider' or { perSecond?, perDay?, key?, counts? }, got ${JSON.stringify(quota)}`,
    );
  }
  for (const key of Object.keys(given)) {
    if (!QUOTA_KEYS.has(key)) throw new InvalidOptionsError(`${option}.${key}`, 'is not an option of a lane quota');
  }
  const perSecond = limit(
    `${option}.perSecond`,
    given.perSecond,
    `a number > 0 and at most ${HIGHEST_RATE}`,
    (value) => value > 0 && value <= HIGHEST_RATE,
  );
  const perDay = limit(
    `${option}.perDay`,
    given.perDay,
    `an integer from 1 to ${LARGEST_OPTION}`,
    (value) => Number.isInteger(value) && value >= 1 && value <= LARGEST_OPTION,
  );
  if ((perSecond === 'provider' || perDay === 'provider') && !reportsQuota) {
    throw new InvalidOptionsError(
      option,
      "'provider' reads the limits from the lane's transport, and this one reports none (an SMTP server, or a " +
        'transport object without sendQuota): give perSecond and perDay as numbers',
    );
  }
  const key = given.key ?? lane;
  if (typeof key !== 'string' || key.length === 0 || key.length > LONGEST_KEY) {
    throw new InvalidOptionsError(
      `${option}.key`,
      `must be a string of 1 to ${LONGEST_KEY} characters, got ${JSON.stringify(key)}`,
    );
  }
  // A limit read from the provider is SES's, which counts recipients.
  const counts = given.counts ?? (perSecond === 'provider' || perDay === 'provider' ? 'recipients' : 'messages');
  if (!COUNTS.has(counts)) {
    throw new InvalidOptionsError(
      `${option}.counts`,
      `must be 'recipients' or 'messages', got ${JSON.stringify(counts)}`,
    );
  }
  return { key, perSecond, perDay, counts };
}

function limit(option: string, value: unknown, expected: string, valid: (value: number) => boolean): QuotaLimit {
  if (value === undefined) return null;
  if (value === 'provider' || (typeof value === 'number' && Number.isFinite(value) && valid(value))) return value;
  throw new InvalidOptionsError(option, `must be ${expected}, or 'provider', got ${JSON.stringify(value)}`);
}

/**
 * Lanes that share a quota key share one bucket and one day's count, so they must agree on the limits and on what
 * they count: with 10 a second in one and 20 in the other, each take would refill the shared bucket at its own rate.
 */
export function requireAgreeingQuotas(lanes: ReadonlyArray<{ name: string; quota: ResolvedLaneQuota | null }>): void {
  const byKey = new Map<string, { name: string; quota: ResolvedLaneQuota }>();
  for (const { name, quota } of lanes) {
    if (!quota) continue;
    const first = byKey.get(quota.key);
    if (!first) {
      byKey.set(quota.key, { name, quota });
    } else if (
      first.quota.perSecond !== quota.perSecond ||
      first.quota.perDay !== quota.perDay ||
      first.quota.counts !== quota.counts
    ) {
      throw new InvalidOptionsError(
        `lanes.${name}.quota`,
        `shares the key ${JSON.stringify(quota.key)} with lane ${first.name}, and so its limits, but gives others: ` +
          `${limitsText(quota)} here, ${limitsText(first.quota)} in ${first.name}`,
      );
    }
  }
}

const limitsText = ({ perSecond, perDay, counts }: ResolvedLaneQuota): string =>
  `perSecond ${JSON.stringify(perSecond)}, perDay ${JSON.stringify(perDay)}, counts ${JSON.stringify(counts)}`;
