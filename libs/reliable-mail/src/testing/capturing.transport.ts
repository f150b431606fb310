import { type AttachmentBytes, attachmentBytes, composeMime } from '../transport/outbound-content.js';
import type {
  MailTransport,
  OutboundMessage,
  RecipientOutcome,
  RenderedMail,
  SendOutcome,
} from '../transport/mail-transport.interface.js';

/** A message as the capturing transport took it: what the recipients would have received. */
export interface CapturedMail extends Omit<RenderedMail, 'attachments'> {
  messageId: string;
  lane: string;
  attachments: AttachmentBytes[];
  /** The recipients that took it, lower case: a retry is sent only to those still waiting. */
  recipients: string[];
  /** The message as it would go over SMTP (MIME, with the stored Message-ID; Bcc in no header). */
  raw: Buffer;
}

/** How the capturing transport answers for a recipient it was told about (`MailTester.refuse` / `defer`). */
/** The reply a captured mail is recorded with, as an SMTP server that took it says it. */
const CAPTURED = '250 2.0.0 captured';

export interface ScriptedAnswer {
  status: 'refused' | 'deferred';
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string;
}

/**
 * A transport that keeps every message in memory instead of sending it, for an app's own tests: each recipient is
 * accepted unless a test scripted another answer for it. Messages are kept in the order they were sent.
 */
export class CapturingTransport implements MailTransport {
  readonly captured: CapturedMail[] = [];
  private readonly scripted = new Map<string, ScriptedAnswer>();

  /** From now on, answers for this recipient as scripted (a refusal fails it, a deferral retries it). */
  answer(address: string, answer: ScriptedAnswer): void {
    this.scripted.set(address.toLowerCase(), answer);
  }

  /** Forgets the captured messages and the scripted answers. */
  clear(): void {
    this.captured.length = 0;
    this.scripted.clear();
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    // Referenced attachments arrive as streams: read once, so that the test sees their bytes and the MIME has them.
    const mail = { ...message.mail, attachments: await attachmentBytes(message.mail, signal) };
    const raw = await composeMime(message.messageId, mail, signal);
    const recipients: RecipientOutcome[] = message.recipients.map((address) => {
      const scripted = this.scripted.get(address.toLowerCase());
      return scripted
        ? { address, ...scripted, perRecipient: true }
        : {
            address,
            status: 'accepted',
            replyCode: 250,
            enhancedStatus: '2.0.0',
            reply: CAPTURED,
            perRecipient: false,
          };
    });
    if (recipients.some((recipient) => recipient.status === 'accepted')) {
      this.captured.push({
        messageId: message.messageId,
        lane: message.lane,
        ...mail,
        recipients: recipients.filter((r) => r.status === 'accepted').map((r) => r.address.toLowerCase()),
        raw,
      });
    }
    return { kind: 'attempted', recipients, reply: CAPTURED, providerMessageId: null, slowDown: false };
  }

  async verify(): Promise<void> {
    // Always ready: nothing to reach.
  }

  async close(): Promise<void> {
    // Nothing to close.
  }
}
