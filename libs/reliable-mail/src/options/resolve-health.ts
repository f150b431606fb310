import { InvalidOptionsError } from '../errors.js';
import type { HealthOptions } from './reliable-mail-options.interface.js';
import { requirePositiveInteger, requireSpan } from './require.js';
import { withDefaults } from './with-defaults.js';

const DEFAULT_HEALTH_OPTIONS: Required<HealthOptions> = {
  maxBacklog: 10_000,
  maxLagMs: 300_000,
  deadLetterWindowMs: 3_600_000,
  maxDeadLetters: 0,
  maxDispatcherIdleMs: 60_000,
  maxEventAgeMs: 600_000,
  verifyTransports: false,
  verifySmtp: false,
  feedbackWindowMs: 86_400_000,
  maxComplaintRate: 0.001,
  maxHardBounceRate: 0.05,
  minSentForRates: 100,
};

/** The health indicator's thresholds, defaults applied, each checked. */
export function resolveHealth(options: HealthOptions | undefined): Required<HealthOptions> {
  const health = withDefaults(DEFAULT_HEALTH_OPTIONS, options);
  requirePositiveInteger('health.maxBacklog', health.maxBacklog);
  for (const key of [
    'maxLagMs',
    'deadLetterWindowMs',
    'maxDispatcherIdleMs',
    'maxEventAgeMs',
    'feedbackWindowMs',
  ] as const)
    requireSpan(`health.${key}`, health[key]);
  requirePositiveInteger('health.maxDeadLetters', health.maxDeadLetters, 0);
  requirePositiveInteger('health.minSentForRates', health.minSentForRates, 0);
  for (const key of ['maxComplaintRate', 'maxHardBounceRate'] as const) {
    const rate = health[key];
    if (typeof rate !== 'number' || !(rate >= 0 && rate <= 1)) {
      throw new InvalidOptionsError(`health.${key}`, `must be a share between 0 and 1, got ${JSON.stringify(rate)}`);
    }
  }
  for (const key of ['verifyTransports', 'verifySmtp'] as const)
    if (typeof health[key] !== 'boolean') throw new InvalidOptionsError(`health.${key}`, 'must be a boolean');
  return health;
}
