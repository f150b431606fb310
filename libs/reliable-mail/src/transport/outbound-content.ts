import { Readable, type Transform } from 'node:stream';
import { Encoder as Base64Encoder } from 'nodemailer/lib/base64';
import MailComposer from 'nodemailer/lib/mail-composer';
import type MimeNode from 'nodemailer/lib/mime-node';
import { Encoder as QpEncoder } from 'nodemailer/lib/qp';
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
  const node = mimeTree(messageId, mail);
  return builtAtOnce(node) ?? Promise.race([node.build(), deadline(signal, 'the message was being built')]);
}

/** The message as nodemailer's tree of MIME parts, not yet built. */
export function mimeTree(messageId: string, mail: RenderedMail): MimeNode {
  return new MailComposer({
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
}

/**
 * The bytes `node.build()` gives, made at once when every part's content is in memory (a string or a buffer).
 * The build streams each part through a pipeline of transforms over several turns of the event loop: for a text
 * of 2 KB that took twice the CPU of this (0.51-0.58 ms against 0.24-0.28), in a worker whose whole send costs
 * about 1 ms. Here each part's content goes through the very encoder the build pipes it through, as the one chunk
 * the build gives it. Null when a part's content is a stream, which only the build reads.
 */
export function builtAtOnce(root: MimeNode): Buffer | null {
  const pieces: Array<string | Buffer> = [];
  if (!appendPart(root, pieces)) return null;
  const bytes = Buffer.concat(pieces.map((piece) => (typeof piece === 'string' ? Buffer.from(piece) : piece)));
  // As the build, which ends the message with a line break.
  const last = bytes.at(-1);
  if (last === 0x0a) return bytes;
  return Buffer.concat([bytes, Buffer.from(last === 0x0d ? '\n' : '\r\n')]);
}

/** Appends a part as `MimeNode.stream()` writes it: its header, its encoded content, then its children. */
function appendPart(node: MimeNode, pieces: Array<string | Buffer>): boolean {
  const { content } = node;
  if (content !== undefined && typeof content !== 'string' && !Buffer.isBuffer(content)) return false;
  pieces.push(`${node.buildHeaders()}\r\n\r\n`);
  // After the header, which holds the encoding it chose for a text: asked before, as the build does, the choice is
  // made twice, each time reading the whole text.
  const transferEncoding = node.getTransferEncoding();
  if (content) {
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    if (transferEncoding === 'base64') pieces.push(encodedAtOnce(new Base64Encoder(), bytes));
    else if (transferEncoding === 'quoted-printable')
      // Outside text a lone CR or LF is data, not a line break (as `MimeNode.stream()` tells its encoder).
      pieces.push(encodedAtOnce(new QpEncoder({ binary: !/^text\//i.test(node.contentType ?? '') }), bytes));
    else pieces.push(bytes);
  }
  if (!node.multipart) return true;
  for (const [index, child] of node.childNodes.entries()) {
    pieces.push(`${index > 0 ? '\r\n' : ''}--${String(node.boundary)}\r\n`);
    if (!appendPart(child, pieces)) return false;
  }
  pieces.push(`\r\n--${String(node.boundary)}--\r\n`);
  return true;
}

/** What an encoder stream gives for `bytes` written to it in one chunk, run without the stream's turns. */
function encodedAtOnce(encoder: Transform, bytes: Buffer): Buffer {
  const failed = (error?: Error | null) => {
    if (error) throw error;
  };
  // 'buffer' is what a stream passes with a buffer it was written; the encoders then take the bytes as they are.
  encoder._transform(bytes, 'buffer' as BufferEncoding, failed);
  encoder._flush(failed);
  return (encoder.read() as Buffer | null) ?? Buffer.alloc(0);
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
