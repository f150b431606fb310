import { describe, expect, it } from '@jest/globals';
import type { ProviderSendQuota } from '../transport/mail-transport.interface.js';
import { PROVIDER_READ_INTERVAL_MS, PROVIDER_RETRY_MS, ProviderLimits } from './provider-limits.js';

const SES_DEFAULT: ProviderSendQuota = { perSecond: 14, perDay: 50_000, sentLast24Hours: 1_200 };

/** A transport whose reads answer from `answers` in turn (an Error rejects), and what the limits logged. */
function setUp(answers: Array<ProviderSendQuota | null | Error>) {
  let now = 1_000_000;
  const reads: number[] = [];
  const logged: Array<{ level: 'warn' | 'log'; entry: Record<string, unknown> }> = [];
  const limits = new ProviderLimits(
    {
      sendQuota: () => {
        reads.push(now);
        const answer = answers.shift();
        if (answer === undefined) throw new Error('read more often than the case expects');
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
      },
    },
    'bulk',
    {
      warn: (entry: Record<string, unknown>) => void logged.push({ level: 'warn', entry }),
      log: (entry: Record<string, unknown>) => void logged.push({ level: 'log', entry }),
    },
    () => now,
  );
  /** Lets the reads started in the background settle. */
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  return { limits, reads, logged, settle, advance: (ms: number) => (now += ms), start: now };
}

describe('ProviderLimits', () => {
  it('the first call waits for its read; the account’s count of the day’s sends is handed to one take', async () => {
    const { limits, reads, logged, start } = setUp([SES_DEFAULT]);
    expect(await limits.current()).toEqual(SES_DEFAULT);
    expect(limits.takeSentToday()).toBe(1_200);
    expect(limits.takeSentToday()).toBeNull();
    expect(await limits.current()).toEqual(SES_DEFAULT);
    expect(reads).toEqual([start]);
    expect(logged).toEqual([]);
  });

  it('reads again every quarter-hour in the background, answering with what it read before meanwhile', async () => {
    const raised = { perSecond: 50, perDay: 200_000, sentLast24Hours: 9_000 };
    const { limits, reads, advance, settle, start } = setUp([SES_DEFAULT, raised]);
    await limits.current();
    advance(PROVIDER_READ_INTERVAL_MS - 1);
    expect(await limits.current()).toEqual(SES_DEFAULT);
    advance(1);
    expect(await limits.current()).toEqual(SES_DEFAULT);
    await settle();
    expect(await limits.current()).toEqual(raised);
    expect(limits.takeSentToday()).toBe(9_000);
    expect(reads).toEqual([start, start + PROVIDER_READ_INTERVAL_MS]);
  });

  it.each<{
    name: string;
    answers: Array<ProviderSendQuota | null | Error>;
    /** Calls to `current`, each `after` ms after the one before, and what each answers once the reads settle. */
    calls: Array<{ after: number; limits: ProviderSendQuota | null; failedWith: string | null }>;
    reads: number[];
    logged: Array<{ level: 'warn' | 'log'; msg: RegExp }>;
  }>([
    {
      name: 'never read: no limits, one warning however often it fails, a read a minute, and a line once one succeeds',
      answers: [new Error('AccessDeniedException'), new Error('AccessDeniedException'), SES_DEFAULT],
      calls: [
        { after: 0, limits: null, failedWith: 'Error: AccessDeniedException' },
        { after: PROVIDER_RETRY_MS - 1, limits: null, failedWith: 'Error: AccessDeniedException' },
        { after: 1, limits: null, failedWith: 'Error: AccessDeniedException' },
        { after: PROVIDER_RETRY_MS, limits: SES_DEFAULT, failedWith: null },
      ],
      reads: [0, PROVIDER_RETRY_MS, 2 * PROVIDER_RETRY_MS],
      logged: [
        { level: 'warn', msg: /without its rate and daily quota .* until a read succeeds, tried every minute/ },
        { level: 'log', msg: /read the provider's quota again/ },
      ],
    },
    {
      name: 'a read that fails after one succeeded keeps the limits read',
      answers: [SES_DEFAULT, new Error('ServiceUnavailable')],
      calls: [
        { after: 0, limits: SES_DEFAULT, failedWith: null },
        { after: PROVIDER_READ_INTERVAL_MS, limits: SES_DEFAULT, failedWith: 'Error: ServiceUnavailable' },
      ],
      reads: [0, PROVIDER_READ_INTERVAL_MS],
      logged: [{ level: 'warn', msg: /keeps the limits read at .*, tried again every minute/ }],
    },
    {
      name: 'a provider that reports no quota: none, read again a quarter-hour later',
      answers: [null, SES_DEFAULT],
      calls: [
        { after: 0, limits: null, failedWith: null },
        { after: PROVIDER_READ_INTERVAL_MS, limits: SES_DEFAULT, failedWith: null },
      ],
      reads: [0, PROVIDER_READ_INTERVAL_MS],
      logged: [],
    },
  ])('$name', async ({ answers, calls, reads, logged }) => {
    const bed = setUp(answers);
    for (const call of calls) {
      bed.advance(call.after);
      await bed.limits.current();
      await bed.settle();
      expect({ limits: await bed.limits.current(), failedWith: bed.limits.failedWith }).toEqual({
        limits: call.limits,
        failedWith: call.failedWith,
      });
    }
    expect(bed.reads.map((at) => at - bed.start)).toEqual(reads);
    expect(bed.logged).toEqual(
      logged.map(({ level, msg }) => ({
        level,
        entry: expect.objectContaining({ lane: 'bulk', msg: expect.stringMatching(msg) }),
      })),
    );
  });
});
