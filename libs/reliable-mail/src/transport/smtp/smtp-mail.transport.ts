import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer';
import type {
  MailAddress,
  MailTransport,
  OutboundMessage,
  RecipientOutcome,
  RenderedMail,
  SendOutcome,
} from '../mail-transport.interface.js';
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
import { SendDeadlineError, type SmtpSession, type TransactionResult } from './smtp-session.js';
import { SmtpSessionPool } from './smtp-session-pool.js';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';

function formatAddress({ name, address }: MailAddress): { name: string; address: string } | string {
  return name ? { name, address } : address;
}

/** The message as RFC 5322 bytes, built once per attempt so that several transactions send the very same message. */
async function compose(messageId: string, mail: RenderedMail, signal: AbortSignal): Promise<Buffer> {
  const node = new MailComposer({
    messageId,
    from: formatAddress(mail.from),
    to: mail.to.map(formatAddress),
    cc: mail.cc.map(formatAddress),
    replyTo: mail.replyTo.length > 0 ? mail.replyTo.map(formatAddress) : undefined,
    subject: mail.subject,
    text: mail.text,
    html: mail.html,
    headers: mail.headers,
    attachments: mail.attachments.map(({ filename, contentType, content, cid }) => ({
      filename,
      contentType,
      content,
      cid,
    })),
    // Content only ever comes as strings, buffers and streams: nodemailer must never read a path or a URL.
    disableFileAccess: true,
    disableUrlAccess: true,
  }).compile();
  const deadline = new Promise<never>((_resolve, reject) => {
    const abort = () => reject(new SendDeadlineError('the send deadline passed while the message was being built'));
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
  });
  return Promise.race([node.build(), deadline]);
}

/**
 * SMTP through nodemailer's connections, pooled per lane. Each send gets a connection of its own, sends the message
 * in as many transactions as its recipients need (`maxRecipientsPerTransaction`, or fewer when the server answers
 * 452 4.5.3), and reports every recipient: accepted, deferred (4yz), refused (5yz), or unknown (the connection was
 * lost after the whole message was written). A failure of the session itself (connection, greeting, EHLO, login)
 * or of the module's own sender is an outage of the lane, not of the message.
 */
export class SmtpMailTransport implements MailTransport {
  private readonly pool: SmtpSessionPool;

  constructor(
    private readonly options: ResolvedSmtpOptions,
    connections: number,
    /** The module's `from`, lower case: a server that refuses it refuses every message of the lane. */
    private readonly defaultSender: string,
  ) {
    this.pool = new SmtpSessionPool(options, connections);
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    let body: Buffer;
    try {
      body = await compose(message.messageId, message.mail, signal);
    } catch (error) {
      return everyRecipient(message.recipients, 'deferred', replyOfError(error as SmtpError));
    } finally {
      // A stream a resolver opened for an attachment is this attempt's: a failed build may leave it unread.
      for (const { content } of message.mail.attachments) {
        if (content instanceof Readable && !content.destroyed) content.destroy();
      }
    }

    let session: SmtpSession;
    try {
      session = await this.pool.acquire(signal);
    } catch (error) {
      return { kind: 'outage', ...replyOfError(error as SmtpError) };
    }
    const conversation = new Conversation(
      message.recipients,
      message.envelopeSender !== undefined || message.mail.from.address.toLowerCase() === this.defaultSender,
    );
    let reusable = true;
    try {
      reusable = await conversation.run(
        session,
        message.envelopeSender ?? message.mail.from.address,
        body,
        this.options.maxRecipientsPerTransaction,
        signal,
      );
    } finally {
      this.pool.release(session, reusable);
    }
    return conversation.outcome();
  }

  async verify(): Promise<void> {
    const session = await this.pool.acquire(
      AbortSignal.timeout(this.options.connectionTimeout + this.options.greetingTimeout),
    );
    session.quit();
  }

  async close(): Promise<void> {
    this.pool.close();
  }
}

/** The transactions of one send, and what each recipient came to. */
class Conversation {
  private readonly results = new Map<string, RecipientOutcome>();
  private accepting: string | null = null;
  private slowDown = false;
  private outage: SmtpReply | null = null;

  constructor(
    private readonly recipients: string[],
    /** The envelope sender is the module's own (its `from`, or a VERP address): refused, it stops the lane. */
    private readonly fromDefaultSender: boolean,
  ) {}

  /** Runs transactions until every recipient has an outcome; returns whether the connection may be reused. */
  async run(
    session: SmtpSession,
    from: string,
    body: Buffer,
    chunkSize: number,
    signal: AbortSignal,
  ): Promise<boolean> {
    const waiting = [...this.recipients];
    while (waiting.length > 0) {
      const chunk = waiting.splice(0, chunkSize);
      const result = await session.transact(from, chunk, body, signal);
      const next = result.ok ? this.accepted(chunk, result.info) : this.failed(chunk, result);
      // RFC 5321 §4.5.3.1.10: recipients past the server's limit go out at once in another transaction.
      waiting.unshift(...next.again);
      if (!next.reusable || (next.reset && !(await session.reset()))) {
        // The rest were never tried: they wait for the next attempt, on a fresh connection.
        const untried = parseReply('not tried in this attempt: its connection failed');
        for (const address of waiting) this.set(address, 'deferred', untried);
        return false;
      }
    }
    return true;
  }

  outcome(): SendOutcome {
    if (this.outage) return { kind: 'outage', ...this.outage };
    return {
      kind: 'attempted',
      recipients: this.recipients.map((address) => this.results.get(address)!),
      reply: this.accepting,
      providerMessageId: this.accepting === null ? null : providerMessageIdOf(this.accepting),
      slowDown: this.slowDown,
    };
  }

  private accepted(
    chunk: string[],
    info: { accepted: Array<string | { address?: string }>; response: string; rejectedErrors?: SmtpError[] },
  ): { again: string[]; reusable: boolean; reset: boolean } {
    const refusals = new Map((info.rejectedErrors ?? []).map((error) => [recipientOf(error), replyOfError(error)]));
    const again = this.recipientReplies(chunk, refusals, info.accepted.length > 0);
    const accepted = new Set(info.accepted.map((entry) => addressOf(entry)));
    const reply = parseReply(info.response);
    for (const address of chunk) if (accepted.has(address)) this.set(address, 'accepted', reply);
    this.accepting ??= info.response;
    return { again, reusable: true, reset: false };
  }

  private failed(
    chunk: string[],
    { error, stage }: Extract<TransactionResult, { ok: false }>,
  ): { again: string[]; reusable: boolean; reset: boolean } {
    const reply = replyOfError(error);
    if (error.command === 'MAIL FROM' && reply.replyCode !== null) {
      // The module's own sender refused means every message of the lane is refused: an outage, unless this send
      // already delivered to some recipients (then the rest is simply deferred).
      if (this.fromDefaultSender && this.results.size === 0) {
        this.outage = reply;
        for (const address of chunk) this.set(address, 'deferred', reply);
        return { again: [], reusable: false, reset: false };
      }
      return this.whole(chunk, reply);
    }
    if (error.command === 'RCPT TO' && error.rejectedErrors) {
      // Every recipient of the transaction refused at RCPT, each with a reply of its own.
      const replies = new Map(error.rejectedErrors.map((refusal) => [recipientOf(refusal), replyOfError(refusal)]));
      const again = this.recipientReplies(chunk, replies, false);
      const deferred = chunk.some((address) => this.results.get(address)?.status === 'deferred');
      return { again, reusable: !deferred, reset: true };
    }
    if (reply.replyCode !== null) return this.whole(chunk, reply);
    // No reply: the connection failed, timed out or was cut at the deadline. Until the whole message was written
    // the server cannot have taken it; after that it may have (RFC 1047).
    for (const address of chunk) this.set(address, stage === 'written' ? 'unknown' : 'deferred', reply);
    return { again: [], reusable: false, reset: false };
  }

  /** A reply to the whole transaction (MAIL FROM, DATA, or the final dot) covers each of its recipients. */
  private whole(chunk: string[], reply: SmtpReply): { again: string[]; reusable: boolean; reset: boolean } {
    const status = recipientStatusOf(reply);
    if (asksToSlowDown(reply)) this.slowDown = true;
    for (const address of chunk) this.set(address, status, reply, chunk.length === 1);
    // A refusal leaves the session as good as it was; after a transient failure the retry gets a fresh one.
    return { again: [], reusable: status === 'refused' && reply.replyCode !== 421, reset: true };
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

function recipientOf(error: SmtpError & { recipient?: string }): string {
  return (error.recipient ?? '').toLowerCase();
}

function addressOf(entry: string | { address?: string }): string {
  return (typeof entry === 'string' ? entry : (entry.address ?? '')).toLowerCase();
}

function everyRecipient(recipients: string[], status: RecipientOutcome['status'], reply: SmtpReply): SendOutcome {
  return {
    kind: 'attempted',
    recipients: recipients.map((address) => ({ address, status, ...reply, perRecipient: false })),
    reply: null,
    providerMessageId: null,
    slowDown: false,
  };
}
