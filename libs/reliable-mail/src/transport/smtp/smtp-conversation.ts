import type { RecipientOutcome, SendOutcome } from '../mail-transport.interface.js';
import {
  asksToSlowDown,
  isTooManyRecipients,
  parseReply,
  providerMessageIdOf,
  recipientStatusOf,
  replyOfError,
  type SmtpError,
  type SmtpReply,
} from './smtp-reply.js';
import type { SmtpSession, TransactionResult } from './smtp-session.js';

/**
 * What one transaction leaves for the next: recipients to send again at once (past the server's limit), whether the
 * send may go on over this connection (if not, why the rest were not tried), and whether the connection needs a
 * RSET first.
 */
interface Step {
  again: string[];
  goOn: boolean;
  reset: boolean;
  stoppedBecause?: string;
}

/** The SMTP transactions of one send, and what each recipient came to. */
export class SmtpConversation {
  private readonly results = new Map<string, RecipientOutcome>();
  private accepting: string | null = null;
  private acceptedAt: Date | null = null;
  private slowDown = false;
  private outage: SmtpReply | null = null;
  private stoppedAtShutdown = false;

  constructor(
    private readonly recipients: string[],
    /** The envelope sender is the module's own (its `from`, or VERP addresses): refused, it stops the lane. */
    private readonly fromDefaultSender: boolean,
  ) {}

  /**
   * Runs transactions until every recipient has an outcome; returns whether the connection may be reused. It may
   * not after any transient failure, even of one recipient: the retry gets a fresh session.
   */
  async run(
    session: SmtpSession,
    senderOf: (recipient: string) => string,
    body: Buffer,
    chunkSize: number,
    signal: AbortSignal,
    stopping?: AbortSignal,
  ): Promise<boolean> {
    const waiting = [...this.recipients];
    while (waiting.length > 0) {
      if (stopping?.aborted && waiting.length < this.recipients.length) {
        // The app shuts down: what went out is settled now rather than sent again after the lease.
        const untried = parseReply('not tried in this attempt: the app shut down');
        for (const address of waiting) this.set(address, 'deferred', untried);
        this.stoppedAtShutdown = true;
        return false;
      }
      // A transaction has one envelope sender: recipients of another (each VERP address is its recipient's) wait.
      const from = senderOf(waiting[0]);
      const chunk = takeUpTo(waiting, chunkSize, (address) => senderOf(address) === from);
      const result = await session.transact(from, chunk, body, signal);
      const next = result.ok ? this.accepted(chunk, result.info) : this.failed(chunk, result);
      // RFC 5321 §4.5.3.1.10: recipients past the server's limit go out at once in another transaction.
      waiting.unshift(...next.again);
      const stoppedBecause = !next.goOn
        ? (next.stoppedBecause ?? 'its connection failed')
        : next.reset && !(await session.reset())
          ? 'the connection failed at the RSET after the transaction before'
          : null;
      if (stoppedBecause !== null) {
        // The rest were never tried: they wait for the next attempt, on a fresh connection.
        const untried = parseReply(`not tried in this attempt: ${stoppedBecause}`);
        for (const address of waiting) this.set(address, 'deferred', untried);
        return false;
      }
    }
    return !this.recipients.some((address) => this.results.get(address)?.status === 'deferred');
  }

  outcome(): SendOutcome {
    if (this.outage) return { kind: 'outage', ...this.outage };
    return {
      kind: 'attempted',
      recipients: this.recipients.map((address) => this.results.get(address)!),
      reply: this.accepting,
      providerMessageId: this.accepting === null ? null : providerMessageIdOf(this.accepting),
      acceptedAt: this.acceptedAt,
      slowDown: this.slowDown,
      ...(this.stoppedAtShutdown ? { stoppedAtShutdown: true } : {}),
    };
  }

  private accepted(
    chunk: string[],
    info: { accepted: Array<string | { address?: string }>; response: string; rejectedErrors?: SmtpError[] },
  ): Step {
    const refusals = new Map((info.rejectedErrors ?? []).map((error) => [recipientOf(error), replyOfError(error)]));
    const again = this.recipientReplies(chunk, refusals, info.accepted.length > 0);
    const accepted = new Set(info.accepted.map((entry) => addressOf(entry)));
    const reply = parseReply(info.response);
    for (const address of chunk) if (accepted.has(address)) this.set(address, 'accepted', reply);
    if (accepted.size > 0) this.acceptedAt ??= new Date();
    this.accepting ??= info.response;
    // A recipient deferred here does not stop the send's other transactions; run() then does not keep the session.
    return { again, goOn: true, reset: false };
  }

  private failed(chunk: string[], { error, stage }: Extract<TransactionResult, { ok: false }>): Step {
    const reply = replyOfError(error);
    if (error.command === 'MAIL FROM' && reply.replyCode !== null) {
      // The module's own sender refused means every message of the lane is refused: an outage, unless this send
      // already had an answer for some recipients (then the rest is simply deferred). Never a refusal of the
      // recipients: it says nothing about them, nor about this mail.
      if (this.fromDefaultSender) {
        if (this.results.size === 0) this.outage = reply;
        else if (asksToSlowDown(reply)) this.slowDown = true;
        for (const address of chunk) this.set(address, 'deferred', reply);
        return {
          again: [],
          goOn: false,
          reset: false,
          stoppedBecause: `the module's sender was refused (${reply.reply})`,
        };
      }
      // About the sender, never a recipient: even with one recipient and a 5.1.x, it must not be suppressed.
      return this.whole(chunk, reply, false);
    }
    if (error.command === 'RCPT TO' && error.rejectedErrors) {
      // Every recipient of the transaction refused at RCPT, each with a reply of its own.
      const replies = new Map(error.rejectedErrors.map((refusal) => [recipientOf(refusal), replyOfError(refusal)]));
      const again = this.recipientReplies(chunk, replies, false);
      // A recipient put off (greylisted, mailbox full) says nothing of the others, each of which (with VERP) has a
      // transaction of its own: after a RSET they go on, unless the server closes the session or asks for less.
      const stop = [...replies.values()].find(stopsTheSession);
      return { again, goOn: !stop, reset: true, stoppedBecause: stop && whyStopped(stop) };
    }
    if (reply.replyCode !== null) return this.whole(chunk, reply);
    // No reply: the connection failed, timed out or was cut at the deadline. Until the whole message was written
    // the server cannot have taken it; after that it may have (RFC 1047).
    for (const address of chunk) this.set(address, stage === 'written' ? 'unknown' : 'deferred', reply);
    return { again: [], goOn: false, reset: false };
  }

  /**
   * A reply to the whole transaction (MAIL FROM, DATA, or the final dot) covers each of its recipients. It speaks of
   * the recipient (`perRecipient`, so that a hard bounce suppresses it) only when the transaction had one recipient
   * and the reply was not to MAIL FROM.
   */
  private whole(chunk: string[], reply: SmtpReply, perRecipient = chunk.length === 1): Step {
    const status = recipientStatusOf(reply);
    if (asksToSlowDown(reply)) this.slowDown = true;
    for (const address of chunk) this.set(address, status, reply, perRecipient);
    // A refusal leaves the session as good as it was, and so does a 4yz that speaks of one recipient (its own
    // transaction's): the others go on. A 4yz to a transaction of several is the server's trouble, not theirs: the
    // rest wait for the next attempt. Either way a session that saw a deferral is not kept (run()).
    const goOn = !stopsTheSession(reply) && (status === 'refused' || perRecipient);
    return { again: [], goOn, reset: true, stoppedBecause: goOn ? undefined : whyStopped(reply) };
  }

  /** Records each recipient's RCPT reply; returns those to send again in another transaction (452 4.5.3). */
  private recipientReplies(chunk: string[], replies: Map<string, SmtpReply>, someAccepted: boolean): string[] {
    const again: string[] = [];
    for (const address of chunk) {
      const reply = replies.get(address);
      if (!reply) continue;
      // Only after the server took someone in this transaction: otherwise its limit is not the reason.
      if (someAccepted && isTooManyRecipients(reply)) again.push(address);
      else {
        if (asksToSlowDown(reply)) this.slowDown = true;
        this.set(address, recipientStatusOf(reply), reply, true);
      }
    }
    return again;
  }

  private set(address: string, status: RecipientOutcome['status'], reply: SmtpReply, perRecipient = false): void {
    this.results.set(address, { address, status, ...reply, perRecipient });
  }
}

/** A 421 closes the session (RFC 5321 §3.8); a reply asking to slow down is not answered with more transactions. */
function stopsTheSession(reply: SmtpReply): boolean {
  return reply.replyCode === 421 || asksToSlowDown(reply);
}

function whyStopped(reply: SmtpReply): string {
  if (reply.replyCode === 421) return `the server closed the session (${reply.reply})`;
  if (asksToSlowDown(reply)) return `the server asked to slow down (${reply.reply})`;
  return `the transaction before was put off (${reply.reply})`;
}

/** Takes from `waiting`, in order, up to `limit` recipients that `fits`; the others stay. */
function takeUpTo(waiting: string[], limit: number, fits: (address: string) => boolean): string[] {
  const taken: string[] = [];
  for (let index = 0; index < waiting.length && taken.length < limit;) {
    if (fits(waiting[index])) taken.push(...waiting.splice(index, 1));
    else index++;
  }
  return taken;
}

function recipientOf(error: SmtpError & { recipient?: string }): string {
  return (error.recipient ?? '').toLowerCase();
}

function addressOf(entry: string | { address?: string }): string {
  return (typeof entry === 'string' ? entry : (entry.address ?? '')).toLowerCase();
}
