import type { SqlClient } from '../database/sql-client.js';
import type { QuotaCounts } from '../options/reliable-mail-options.interface.js';
import type { ResolvedLaneQuota } from '../options/resolve-quota.js';
import { pauseSendQuota } from '../outbox/sql/pause-send-quota.js';
import { settleSendQuota } from '../outbox/sql/settle-send-quota.js';
import { type QuotaShortfall, type SendQuotaPace, takeSendQuota } from '../outbox/sql/take-send-quota.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { ProviderLimits, type QuotaLogger } from './provider-limits.js';
import { GrantClock, paceFor } from './quota-pace.js';

/** SES's day: its quota counts the sends of the last 24 hours. */
export const QUOTA_DAY_MS = 86_400_000;

/** The limits in force: numbers, each null for none. */
export interface QuotaLimits {
  perSecond: number | null;
  perDay: number | null;
}

/** What one take allows the lane. */
export interface QuotaTake {
  /** Sends the lane may start now; `settle` gives back what they do not use, and charges what they use beyond. */
  granted: number;
  /** When the take was made, on the database's clock: `settle` finds its grant by it. */
  takenAtMs: number;
  /** How long until a take could grant one more: 0 when one could now. */
  waitMs: number;
  /** Why fewer were granted than asked for; null when all were. */
  shortBy: QuotaShortfall | null;
  /**
   * When the granted sends may start, on this instance's clock: a fixed delay after the grant for a lane with a
   * rate (see `GRANT_TO_SEND_MS`), so that they reach the provider as evenly as they were granted; 0 for a lane with
   * only a daily quota.
   */
  sendsStartAt: number;
}

/** The quota as the lane's latest take and pause found it, for the health indicator and the console. */
export interface SendQuotaState {
  /** `'daily'` while the rolling day's sends reach `perDay`: nothing more goes out before `resetsAt`. */
  exhausted: 'daily' | null;
  /** While exhausted: when the oldest send counted leaves the 24 hours, and the lane sends again. */
  resetsAt: Date | null;
  /** While a provider's Retry-After, seen by any instance, holds the key. */
  pausedUntil: Date | null;
  /** The sends counted in the rolling day, by every instance, at the latest take; null before the first. */
  sentToday: number | null;
  limits: QuotaLimits;
  /** While a limit read from the provider could not be read: why (the lane sends without it meanwhile). */
  providerReadFailure: string | null;
}

export interface SharedSendQuotaOptions {
  lane: string;
  quota: ResolvedLaneQuota;
  /** The lane's transport object (none for SMTP), read when a limit is `'provider'`. */
  transport: Pick<MailTransport, 'sendQuota'> | null;
  logger: QuotaLogger;
  /** This instance's clock, in ms: the dates of `state()` are on it. */
  clock?: () => number;
  /** The day's length: `QUOTA_DAY_MS` (a test shortens it). */
  dayMs?: number;
}

/**
 * One lane's share of a provider's limits, kept in the database for every instance (mail_send_quota, one row per
 * key): taken before each claim, so that a mail over the quota is never claimed and never charged an attempt; settled
 * with what the claimed rows cost; paused for every instance when the provider asks one to wait.
 */
export class SharedSendQuota {
  private readonly provider: ProviderLimits | null;
  private readonly clock: () => number;
  private readonly dayMs: number;
  /** The pace of the latest take, which its settle keeps to; null for no rate. */
  private pace: SendQuotaPace | null = null;
  private limits: QuotaLimits = { perSecond: null, perDay: null };
  /** What the latest take found, on this instance's clock. */
  private sentToday: number | null = null;
  private dayResetsAt = 0;
  /** The database's time of the latest take, which a settle of it adjusts `sentToday` for. */
  private latestTakenAtMs: number | null = null;
  private pausedUntil = 0;
  private readonly grantClock = new GrantClock();

  constructor(
    private readonly db: SqlClient,
    private readonly options: SharedSendQuotaOptions,
  ) {
    const { quota, transport, lane, logger } = options;
    this.clock = options.clock ?? Date.now;
    this.dayMs = options.dayMs ?? QUOTA_DAY_MS;
    const readsProvider = quota.perSecond === 'provider' || quota.perDay === 'provider';
    const sendQuota = transport?.sendQuota?.bind(transport);
    // resolveOptions refuses such a lane; this guards a caller that made its options itself.
    if (readsProvider && !sendQuota)
      throw new TypeError(`lane ${lane}: its quota reads the provider's limits, and its transport has no sendQuota`);
    this.provider = readsProvider ? new ProviderLimits({ sendQuota: sendQuota! }, lane, logger, this.clock) : null;
  }

  get key(): string {
    return this.options.quota.key;
  }

  /** What the limits count, as the provider does: what `settle` is told the rows used. */
  get counts(): QuotaCounts {
    return this.options.quota.counts;
  }

  /** Takes up to `wanted` sends (at least 1) for this lane from the limits every instance shares. */
  async take(wanted: number): Promise<QuotaTake> {
    if (!Number.isInteger(wanted) || wanted < 1)
      throw new RangeError(`a quota take is of at least one send, got ${wanted}`);
    const { perSecond, perDay } = await this.limitsNow();
    this.pace = perSecond === null ? null : paceFor(perSecond);
    const grant = await takeSendQuota(this.db, {
      key: this.key,
      wanted,
      pace: this.pace,
      perDay,
      dayMs: this.dayMs,
      providerSentToday: this.options.quota.perDay === 'provider' ? this.provider!.takeSentToday() : null,
    });
    const at = this.clock();
    this.grantClock.note(grant.takenAtMs, at);
    this.sentToday = grant.sentToday;
    this.latestTakenAtMs = grant.takenAtMs;
    // Spent when a take finds nothing left for the day: an idle lane takes the day's last sends at every poll and
    // gives them back, and is not out of its quota meanwhile.
    this.dayResetsAt = grant.granted === 0 && grant.dayResetsInMs !== null ? at + grant.dayResetsInMs : 0;
    if (grant.pausedForMs !== null) this.pausedUntil = Math.max(this.pausedUntil, at + grant.pausedForMs);
    return {
      granted: grant.granted,
      takenAtMs: grant.takenAtMs,
      waitMs: grant.waitMs,
      shortBy: grant.shortBy,
      sendsStartAt: this.pace ? this.grantClock.sendsStartAt(grant.takenAtMs) : 0,
    };
  }

  /**
   * Settles `take` with what its claim's rows cost (`quotaChargeOf` each): what they did not use goes back (the claim
   * found fewer due rows), what they used beyond it is charged (mails to several recipients where the provider
   * counts recipients), and the next takes wait for it.
   */
  async settle(take: QuotaTake, used: number): Promise<void> {
    const unused = take.granted - used;
    if (unused === 0) return;
    await settleSendQuota(this.db, {
      key: this.key,
      unused,
      burst: this.pace?.burst ?? null,
      takenAtMs: take.takenAtMs,
      dayMs: this.dayMs,
    });
    // `state()` says what the settle left, not what the take saw.
    if (take.takenAtMs === this.latestTakenAtMs && this.sentToday !== null) this.sentToday -= unused;
  }

  /**
   * Holds every instance's sends through this key for `ms` (a provider's Retry-After), timed by the database's
   * clock; a longer pause already set stays.
   */
  async pauseFor(ms: number): Promise<void> {
    if (!(ms > 0)) return;
    const pausedForMs = await pauseSendQuota(this.db, this.key, ms);
    this.pausedUntil = Math.max(this.pausedUntil, this.clock() + pausedForMs);
  }

  state(): SendQuotaState {
    const now = this.clock();
    const exhausted = now < this.dayResetsAt;
    return {
      exhausted: exhausted ? 'daily' : null,
      resetsAt: exhausted ? new Date(this.dayResetsAt) : null,
      pausedUntil: now < this.pausedUntil ? new Date(this.pausedUntil) : null,
      sentToday: this.sentToday,
      limits: { ...this.limits },
      providerReadFailure: this.provider?.failedWith ?? null,
    };
  }

  private async limitsNow(): Promise<QuotaLimits> {
    const { perSecond, perDay } = this.options.quota;
    const reading = this.provider ? await this.provider.current() : null;
    this.limits = {
      perSecond: perSecond === 'provider' ? (reading?.perSecond ?? null) : perSecond,
      perDay: perDay === 'provider' ? (reading?.perDay ?? null) : perDay,
    };
    return this.limits;
  }
}
