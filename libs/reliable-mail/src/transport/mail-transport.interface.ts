import type { MailPayload, RejectedRecipient } from '../outbox/mail.types.js';

export interface OutboundMessage {
  /** The stored Message-ID, the same on every attempt. */
  messageId: string;
  payload: MailPayload;
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
