import type { Logger } from '@nestjs/common';
import type { MailTransport, ProviderSendQuota } from '../transport/mail-transport.interface.js';

/**
 * How often a provider's limits are read again: a quarter of an hour, the day window's step (see
 * take-send-quota.ts), so that the account's count of the day's sends is put in again before the last one left
 * the window. SES raises an account's quotas over time; GetAccount may be called once a second.
 */
export const PROVIDER_READ_INTERVAL_MS = 15 * 60_000;
/** A failed read is tried again after a minute. */
export const PROVIDER_RETRY_MS = 60_000;
/** A read that takes longer fails (the first one holds up the lane's first take). */
export const PROVIDER_READ_TIMEOUT_MS = 10_000;

export type QuotaLogger = Pick<Logger, 'warn' | 'log'>;

/**
 * A lane's limits as its provider reports them (`MailTransport.sendQuota`), read at the lane's first take and every
 * quarter-hour after in the background. When the provider cannot be asked (no `ses:GetAccount` permission, the API
 * down), the limits read before stay; until one read succeeds the lane sends without them, paced only by the
 * provider's own throttling replies, as before quotas. That is logged once, and again when a read succeeds.
 */
export class ProviderLimits {
  private reading: ProviderSendQuota | null = null;
  private readAt: number | null = null;
  /** The provider's count of the day's sends from the latest read, until a take passes it on. */
  private unreportedSentToday: number | null = null;
  private failure: string | null = null;
  private nextReadAt = 0;
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly transport: Required<Pick<MailTransport, 'sendQuota'>>,
    private readonly lane: string,
    private readonly logger: QuotaLogger,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The latest limits read, or null while none could be. The first call waits for its read; later ones do not. */
  async current(): Promise<ProviderSendQuota | null> {
    if (this.clock() >= this.nextReadAt) {
      const read = this.read();
      if (this.readAt === null && this.failure === null) await read;
    }
    return this.reading;
  }

  /** The provider's count of the day's sends, once after each read: the take that follows puts it in the window. */
  takeSentToday(): number | null {
    const sent = this.unreportedSentToday;
    this.unreportedSentToday = null;
    return sent;
  }

  /** Why the latest read failed, while it did. */
  get failedWith(): string | null {
    return this.failure;
  }

  private read(): Promise<void> {
    this.inFlight ??= this.transport
      .sendQuota(AbortSignal.timeout(PROVIDER_READ_TIMEOUT_MS))
      .then(
        (reading) => this.succeeded(reading),
        (error: unknown) => this.failed(error),
      )
      .finally(() => (this.inFlight = null));
    return this.inFlight;
  }

  private succeeded(reading: ProviderSendQuota | null): void {
    if (this.failure !== null)
      this.logger.log({ msg: "read the provider's quota again", lane: this.lane, perSecond: reading?.perSecond });
    this.reading = reading;
    this.readAt = this.clock();
    this.unreportedSentToday = reading?.sentLast24Hours ?? null;
    this.failure = null;
    this.nextReadAt = this.readAt + PROVIDER_READ_INTERVAL_MS;
  }

  private failed(error: unknown): void {
    const first = this.failure === null;
    this.failure = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.nextReadAt = this.clock() + PROVIDER_RETRY_MS;
    if (!first) return;
    this.logger.warn({
      msg:
        this.readAt === null
          ? "could not read the provider's quota: the lane sends without its rate and daily quota (the provider's " +
            'throttling replies still pause it) until a read succeeds, tried every minute'
          : "could not read the provider's quota: the lane keeps the limits read at " +
            `${new Date(this.readAt).toISOString()}, tried again every minute`,
      lane: this.lane,
      error: this.failure,
    });
  }
}
