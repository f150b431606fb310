import { Logger } from '@nestjs/common';
import { InvalidOptionsError } from '../../errors.js';
import type {
  MailTransport,
  OutboundMessage,
  ProviderSendQuota,
  SendOutcome,
  TransportContext,
} from '../mail-transport.interface.js';
import { keptReply, withoutAddresses } from '../../shared/logged-reply.js';
import { failedBeforeHandoff } from './failed-before-handoff.js';

/** Array.isArray without its `any[]`: the list keeps its entries' type. */
const isList = (value: unknown): value is readonly unknown[] => Array.isArray(value);

/** A transport's name in a lane of several: it goes into each attempt's record, its events, metrics and logs. */
export const TRANSPORT_NAME_PATTERN = /^[\w.-]{1,64}$/;

/** One transport of a failover list, with the name its attempts are recorded under. */
export interface FailoverEntry {
  name: string;
  transport: MailTransport;
}

export interface FailoverTransportOptions {
  /**
   * How long after a transport failed the lane stays on the next one before one mail tries the first again (a
   * probe); the lane returns to it once a probe goes through.
   * @default 60000
   */
  probeAfterMs?: number;
}

/**
 * A lane's transports in order of preference (SES, then Postmark): each attempt goes through the first that is up. A
 * mail moves to the next transport, within the same attempt, only when the one it tried failed before handoff
 * (`failedBeforeHandoff`: nothing can have been taken, so nothing can arrive twice), never after a request whose
 * outcome is unknown: that one is retried on the same transport with the same Message-ID, as a single transport's.
 * Each attempt records the name of the transport that made it (`SendOutcome.transport`).
 *
 * After a failover the lane sends through the next transport; every `probeAfterMs` one mail tries the first again,
 * and once one goes through, the lane is back on it.
 */
export class FailoverTransport implements MailTransport {
  private readonly logger = new Logger('ReliableMail');
  private readonly probeAfterMs: number;
  /** The transport sends start with. */
  private active = 0;
  /** When a send tries the first transport again (on the `now` clock), while `active` is not the first. */
  private probeAt = 0;
  private probing = false;
  sendQuota?: (signal: AbortSignal) => Promise<ProviderSendQuota | null>;

  constructor(
    private readonly entries: readonly FailoverEntry[],
    options: FailoverTransportOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    if (!isList(entries) || entries.length < 2)
      throw new InvalidOptionsError('FailoverTransport', 'lists at least two transports, in order of preference');
    const names = new Set<string>();
    for (const [index, entry] of entries.entries()) {
      if (typeof entry?.name !== 'string' || !TRANSPORT_NAME_PATTERN.test(entry.name) || names.has(entry.name))
        throw new InvalidOptionsError(
          `FailoverTransport[${index}].name`,
          `must be a name of 1 to 64 letters, digits, "_", "." or "-", each once, got ${JSON.stringify(entry?.name)}`,
        );
      if (typeof entry.transport?.send !== 'function')
        throw new InvalidOptionsError(`FailoverTransport[${index}].transport`, 'must be a MailTransport');
      names.add(entry.name);
    }
    // The first transport's limits, when it reports them: the one the lane sends through unless it is down. Only
    // then, so that a lane's quota: 'provider' is refused at start for a first transport that reports none.
    const first = entries[0].transport;
    if (first.sendQuota) this.sendQuota = (signal) => first.sendQuota!(signal);
    this.probeAfterMs = options.probeAfterMs ?? 60_000;
    if (!Number.isInteger(this.probeAfterMs) || this.probeAfterMs < 1)
      throw new InvalidOptionsError('FailoverTransport.probeAfterMs', 'must be a positive integer of milliseconds');
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    if ((message.possiblyTakenBefore?.length ?? 0) > 0) return this.sendPinned(message, signal);
    const probe = this.active > 0 && !this.probing && this.now() >= this.probeAt;
    if (probe) this.probing = true;
    for (let index = probe ? 0 : this.active; ; index++) {
      const { name, transport } = this.entries[index];
      let outcome: SendOutcome;
      try {
        outcome = await transport.send(message, signal);
      } finally {
        if (probe && index === 0) this.probing = false;
      }
      const failed = failedBeforeHandoff(outcome);
      this.note(index, failed, outcome);
      const last = index === this.entries.length - 1;
      if (!failed || last || signal.aborted || message.stopping?.aborted) return { ...outcome, transport: name };
    }
  }

  /**
   * A retry of a mail an earlier attempt may have handed over: through the transport that attempt went through (or,
   * when it recorded none, a worker having died mid-send, through the one the lane is on), and never on to another
   * within the attempt, whatever it answers: the provider may hold the first copy, and only a retry through it can be
   * deduplicated (Resend's key) or keep the duplicate to that one provider.
   */
  private async sendPinned(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    const recorded = this.entries.findIndex(({ name }) => name === message.possiblyTakenThrough);
    const index = recorded >= 0 ? recorded : this.active;
    const outcome = await this.entries[index].transport.send(message, signal);
    return { ...outcome, transport: this.entries[index].name };
  }

  /** Moves the lane to the next transport when the one it was on failed, and back to the first when it answers. */
  private note(index: number, failed: boolean, outcome: SendOutcome): void {
    const taken = outcome.kind === 'attempted' && outcome.recipients.some(({ status }) => status === 'accepted');
    if (taken && index < this.active) {
      this.logger.log({
        msg: 'lane back on its first transport',
        transport: this.entries[index].name,
        from: this.entries[this.active].name,
      });
      this.active = index;
    } else if (index === 0 && this.active > 0) {
      // A probe that took nothing: the next waits another probeAfterMs.
      this.probeAt = this.now() + this.probeAfterMs;
    } else if (failed && index === this.active && index < this.entries.length - 1) {
      this.active = index + 1;
      this.probeAt = this.now() + this.probeAfterMs;
      this.logger.warn({
        msg: 'lane fails over to its next transport',
        from: this.entries[index].name,
        to: this.entries[index + 1].name,
        reply: shownReply(outcome),
        probeAfterMs: this.probeAfterMs,
      });
    }
  }

  async open(context: TransportContext): Promise<void> {
    for (const { transport } of this.entries) await transport.open?.(context);
  }

  warm(): void {
    this.entries[0].transport.warm?.();
  }

  /** Resolves while one of the transports answers: mail still goes out. */
  async verify(): Promise<void> {
    try {
      await Promise.any(this.entries.map(({ transport }) => transport.verify()));
    } catch (error) {
      const reasons = (error as AggregateError).errors.map(
        (reason, index) => `${this.entries[index].name}: ${String(reason)}`,
      );
      throw new Error(`no transport answers (${reasons.join('; ')})`, { cause: error });
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.entries.map(({ transport }) => transport.close()));
  }
}

/**
 * The reply a failover is logged with, read before the dispatcher reads the outcome (`readOutcome`): cut and without
 * addresses, as the dispatcher's own lines show one.
 */
function shownReply(outcome: SendOutcome): string | null {
  const said = outcome.kind === 'outage' ? outcome.reply : outcome.recipients[0]?.reply;
  return typeof said === 'string' ? withoutAddresses(keptReply(said)) : null;
}
