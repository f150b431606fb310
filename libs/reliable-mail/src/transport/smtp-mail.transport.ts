import { Readable } from 'node:stream';
import nodemailer, { type Transporter, type SMTPPoolOptions, type SMTPPoolSentMessageInfo } from 'nodemailer';
import type { MailAddress } from '../outbox/mail.types.js';
import { DEFAULT_SMTP_TIMEOUTS, type SmtpTransportOptions } from './smtp-transport-options.js';
import type { DeliveryReport, MailTransport, OutboundMessage, SmtpFailure } from './mail-transport.interface.js';

interface RejectedRecipientError extends SmtpFailure {
  recipient?: string;
}

function formatAddress({ name, address }: MailAddress): { name: string; address: string } | string {
  return name ? { name, address } : address;
}

/** nodemailer's pooled SMTP transport, set up for an outbox that owns its retries. */
export class SmtpMailTransport implements MailTransport {
  private readonly transporter: Transporter<SMTPPoolSentMessageInfo>;

  constructor(transport: string | SmtpTransportOptions, maxConnections: number) {
    const base: SMTPPoolOptions = typeof transport === 'string' ? urlToOptions(transport) : { ...transport };
    this.transporter = nodemailer.createTransport({
      ...DEFAULT_SMTP_TIMEOUTS,
      maxConnections,
      ...base,
      pool: true,
      // The pool would otherwise resend a message on a new connection by itself: each attempt must be the
      // outbox's own, recorded before it starts, so that a duplicate can be traced to an attempt.
      maxRequeues: 0,
    });
  }

  async send({ messageId, payload }: OutboundMessage): Promise<DeliveryReport> {
    try {
      return await this.deliver(messageId, payload);
    } finally {
      // A stream a resolver opened for an attachment is this attempt's: a failed send may leave it unread.
      for (const { content } of payload.attachments)
        if (content instanceof Readable && !content.destroyed) content.destroy();
    }
  }

  private async deliver(messageId: string, payload: OutboundMessage['payload']): Promise<DeliveryReport> {
    const info = await this.transporter.sendMail({
      messageId,
      from: formatAddress(payload.from),
      to: payload.to.map(formatAddress),
      cc: payload.cc.map(formatAddress),
      bcc: payload.bcc.map(formatAddress),
      replyTo: payload.replyTo.length > 0 ? payload.replyTo.map(formatAddress) : undefined,
      subject: payload.subject,
      text: payload.text,
      html: payload.html,
      headers: payload.headers,
      attachments: payload.attachments.map(({ filename, contentType, content, cid }) => ({
        filename,
        contentType,
        content,
        cid,
      })),
      // Content only ever comes as strings, buffers and streams: nodemailer must never read a path or a URL.
      disableFileAccess: true,
      disableUrlAccess: true,
    });
    const rejectedErrors = (info as { rejectedErrors?: RejectedRecipientError[] }).rejectedErrors ?? [];
    return {
      accepted: info.accepted.map(String),
      rejected: info.rejected.map((address) => {
        const error = rejectedErrors.find((candidate) => candidate.recipient === String(address));
        return { address: String(address), reply: error?.response ?? null, replyCode: error?.responseCode ?? null };
      }),
      response: info.response,
    };
  }

  async verify(): Promise<void> {
    await this.transporter.verify();
  }

  async close(): Promise<void> {
    this.transporter.close();
  }
}

function urlToOptions(url: string): SMTPPoolOptions {
  const parsed = new URL(url);
  const secure = parsed.protocol === 'smtps:';
  const options: SMTPPoolOptions = {
    host: parsed.hostname,
    port: parsed.port ? Number(parsed.port) : secure ? 465 : 587,
    secure,
  };
  if (parsed.username) {
    options.auth = { user: decodeURIComponent(parsed.username), pass: decodeURIComponent(parsed.password) };
  }
  return options;
}
