import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { MailAddress, OutboundAttachment, RenderedMail } from './mail-transport.interface.js';

/** The dispatcher's deadline passed: the conversation or request was cut. */
export class SendDeadlineError extends Error {
  readonly code = 'EDEADLINE';
}

function composerAddress({ name, address }: MailAddress): { name: string; address: string } | string {
  return name ? { name, address } : address;
}

/** Rejects when `signal` aborts: raced against work that cannot be cancelled itself. */
export function deadline(signal: AbortSignal, what: string): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    const abort = () => reject(new SendDeadlineError(`the send deadline passed while ${what}`));
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
  });
}

/**
 * The message as RFC 5322 bytes with the stored Message-ID, built once per attempt so that several SMTP
 * transactions (or an API that takes raw MIME) send the very same message. Bcc recipients are not in its headers.
 */
export async function composeMime(messageId: string, mail: RenderedMail, signal: AbortSignal): Promise<Buffer> {
  const node = new MailComposer({
    messageId,
    from: composerAddress(mail.from),
    to: mail.to.map(composerAddress),
    cc: mail.cc.map(composerAddress),
    replyTo: mail.replyTo.length > 0 ? mail.replyTo.map(composerAddress) : undefined,
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
  return Promise.race([node.build(), deadline(signal, 'the message was being built')]);
}

/** An attachment read into memory, for an API that takes its content as base64 in JSON. */
export interface AttachmentBytes extends Omit<OutboundAttachment, 'content'> {
  content: Buffer;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}

/** Each attachment's bytes, streams read to their end within the send's deadline. */
export function attachmentBytes(mail: RenderedMail, signal: AbortSignal): Promise<AttachmentBytes[]> {
  const reading = Promise.all(
    mail.attachments.map(async (attachment) => ({
      ...attachment,
      content: Buffer.isBuffer(attachment.content) ? attachment.content : await readAll(attachment.content),
    })),
  );
  return Promise.race([reading, deadline(signal, 'the attachments were being read')]);
}

/** A stream a resolver opened for an attachment is this attempt's: a failed or cut build may leave it unread. */
export function releaseAttachmentStreams(mail: RenderedMail): void {
  for (const { content } of mail.attachments) if (!Buffer.isBuffer(content) && !content.destroyed) content.destroy();
}

/** An address as an RFC 5322 mailbox: `"Ann Example" <ann@example.com>`, or the bare address. */
export function formatMailbox({ name, address }: MailAddress): string {
  return name ? `"${name.replace(/["\\]/g, '\\$&')}" <${address}>` : address;
}

/**
 * The mail's To, Cc and Bcc kept to this attempt's envelope. An API sends to every address it is given, so a
 * recipient that took the message before, refused it or is suppressed must be left out of the request itself.
 */
export function addressedTo(
  mail: RenderedMail,
  recipients: string[],
): { to: MailAddress[]; cc: MailAddress[]; bcc: MailAddress[] } {
  const envelope = new Set(recipients);
  const seen = new Set<string>();
  const keep = (list: MailAddress[]) =>
    list.filter(({ address }) => {
      const key = address.toLowerCase();
      if (!envelope.has(key) || seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  return { to: keep(mail.to), cc: keep(mail.cc), bcc: keep(mail.bcc) };
}

/**
 * The To, Cc and Bcc of one request to an API that refuses a message without a To (Postmark, Resend): the mail's, kept
 * to the request's recipients, except that with no To left the Cc are the To (they see each other either way), and a
 * request to Bcc recipients only (`requestEnvelopes` makes those one to a request) has that recipient as its To. No
 * recipient ever sees the address of a Bcc recipient other than their own.
 */
export function requestAddressing(
  mail: RenderedMail,
  recipients: string[],
): { to: MailAddress[]; cc: MailAddress[]; bcc: MailAddress[] } {
  const { to, cc, bcc } = addressedTo(mail, recipients);
  if (to.length > 0) return { to, cc, bcc };
  if (cc.length > 0) return { to: cc, cc: [], bcc };
  if (bcc.length === 1) return { to: bcc, cc: [], bcc: [] };
  // Not a request `requestEnvelopes` makes. Sent, it would be refused for good (no To); the throw has the attempt
  // retried, and logged as the transport's fault.
  throw new Error(`a request to ${bcc.length} Bcc recipients and no To or Cc: each must go alone`);
}
