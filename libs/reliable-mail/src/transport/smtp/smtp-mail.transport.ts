import type { MailTransport, OutboundMessage, SendOutcome } from '../mail-transport.interface.js';
import { everyRecipientDeferred } from '../deferred-outcome.js';
import { composeMime, releaseAttachmentStreams } from '../outbound-content.js';
import { DkimSigner } from './dkim-signer.js';
import { SmtpConversation } from './smtp-conversation.js';
import { replyOfError, type SmtpError } from './smtp-reply.js';
import { SmtpSession } from './smtp-session.js';
import { SmtpSessionPool } from './smtp-session-pool.js';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';

/**
 * SMTP through nodemailer's connections, pooled per lane. Each send gets a connection of its own, sends the message
 * in as many transactions as its recipients need (`maxRecipientsPerTransaction`, or fewer when the server answers
 * 452 4.5.3), and reports every recipient: accepted, deferred (4yz), refused (5yz), or unknown (the connection was
 * lost after the whole message was written). A failure of the session itself (connection, greeting, EHLO, login)
 * or of the module's own sender is an outage of the lane, not of the message. With `dkim`, each attempt signs the
 * message it built; a message that could not be signed is not sent, and its recipients are deferred.
 */
export class SmtpMailTransport implements MailTransport {
  private readonly pool: SmtpSessionPool;
  private readonly signer: DkimSigner | null;

  constructor(
    private readonly options: ResolvedSmtpOptions,
    connections: number,
    /** The module's `from`, lower case: a server that refuses it refuses every message of the lane. */
    private readonly defaultSender: string,
  ) {
    this.pool = new SmtpSessionPool(options, connections);
    this.signer = options.dkim ? new DkimSigner(options.dkim) : null;
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    let body: Buffer;
    try {
      body = await composeMime(message.messageId, message.mail, signal);
      if (this.signer) body = await this.signer.sign(body);
    } catch (error) {
      return everyRecipientDeferred(message.recipients, replyOfError(error as SmtpError).reply);
    } finally {
      releaseAttachmentStreams(message.mail);
    }

    let session: SmtpSession;
    try {
      session = await this.pool.acquire(signal);
    } catch (error) {
      return { kind: 'outage', ...replyOfError(error as SmtpError) };
    }
    const { envelopeSenders } = message;
    const conversation = new SmtpConversation(
      message.recipients,
      envelopeSenders !== undefined || message.mail.from.address.toLowerCase() === this.defaultSender,
    );
    // Kept only when the conversation ends without a transient failure; not when it throws.
    let reusable = false;
    try {
      reusable = await conversation.run(
        session,
        (recipient) => envelopeSenders?.[recipient] ?? message.mail.from.address,
        body,
        this.options.maxRecipientsPerTransaction,
        signal,
        message.stopping,
      );
    } finally {
      this.pool.release(session, reusable);
    }
    return conversation.outcome();
  }

  /** Opens a connection of the lane ahead of its first mail. */
  warm(): void {
    this.pool.openAhead();
  }

  /**
   * A new connection, whatever the pool holds (an idle one says nothing of the server now); kept for the next mail
   * rather than closed.
   */
  async verify(): Promise<void> {
    const session = await SmtpSession.open(
      this.options,
      AbortSignal.timeout(this.options.connectionTimeout + this.options.greetingTimeout),
    );
    this.pool.adopt(session);
  }

  async close(): Promise<void> {
    this.pool.close();
  }
}
