import type { Readable } from 'node:stream';
import type { MailAddress, RejectedRecipient } from '../outbox/mail.types.js';

/** An attachment as the transport sends it: inline ones decoded, referenced ones resolved. */
export interface OutboundAttachment {
  filename: string;
  contentType: string;
  content: Buffer | Readable;
  /** Content-ID, for an image the html shows inline. */
  cid?: string;
}

/** A mail ready for the wire: its template rendered and its attachments fetched. */
export interface RenderedMail {
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  replyTo: MailAddress[];
  subject: string;
  text?: string;
  html?: string;
  headers: Record<string, string>;
  attachments: OutboundAttachment[];
}

export interface OutboundMessage {
  /** The stored Message-ID, the same on every attempt. */
  messageId: string;
  /** The mail rendered for this attempt (a templated row renders the same version and parameters every time). */
  payload: RenderedMail;
}

/** What the server said when it took the message (2yz after the final dot). */
export interface DeliveryReport {
  accepted: string[];
  rejected: RejectedRecipient[];
  /** The server's reply line to the final dot. */
  response: string;
}

/**
 * The error shape the dispatcher classifies: nodemailer's errors have these fields, and another transport
 * answers the same way for its failures to be classified.
 */
export interface SmtpFailure {
  message: string;
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
}

/** Sends one message and resolves with the server's report, or rejects with an `SmtpFailure`. */
export interface MailTransport {
  send(message: OutboundMessage): Promise<DeliveryReport>;
  /** Resolves when the server answers a connection and accepts the credentials. */
  verify(): Promise<void>;
  close(): Promise<void>;
}
