import { ENHANCED_STATUS_SOURCE } from '../../shared/enhanced-status.js';
import type { RecipientStatus } from '../mail-transport.interface.js';

// What an SMTP reply means, by RFC 5321 reply class and RFC 3463 enhanced status (the table in the README's
// "How each SMTP answer is handled"). Pure functions: the transport decides at which stage a reply came.

/** A server reply line, or a failure's message when there was no reply. */
export interface SmtpReply {
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string;
}

/** The fields nodemailer's errors carry; another library's errors are read the same way. */
export interface SmtpError {
  message?: string;
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
}

const ENHANCED_STATUS_PATTERN = new RegExp(String.raw`^\d{3}[ -](${ENHANCED_STATUS_SOURCE})\b`);
const QUEUE_ID_PATTERNS = [
  /\bqueued as ([\w.@<>-]+)/i, // Postfix, Exim
  /\bid=([\w.@<>-]+)/i,
  /^250 2\.0\.0 OK\s+\d+\s+(\S+) - gsmtp/i, // Gmail: a timestamp, then the id
  /^\d{3}[ -](?:\d\.\d\.\d\s+)?(?:ok|accepted)?[: ]*(?=[\w.-]*\d)([0-9A-F][\w.-]{7,})/i, // Amazon SES and other bare ids
];
/**
 * Replies that ask the sender to slow down. "Try again later" is not here: it is the wording of every ordinary
 * 4yz, greylisting included. Nor is "too many recipients", which asks for another transaction, not less speed.
 */
const RATE_LIMIT_TEXT =
  /rate.?limit|throttl|slow(ing)? down|too many (messages|mails|e-?mails|connections|sessions|requests)/i;
const TOO_MANY_RECIPIENTS_TEXT = /too many recipients/i;

/** The RFC 3463 enhanced status code at the start of a reply line, such as `5.1.1`. */
export function enhancedStatusOf(reply: string | null | undefined): string | null {
  return reply ? (ENHANCED_STATUS_PATTERN.exec(reply.trim())?.[1] ?? null) : null;
}

/** A reply code RFC 5321 allows: three digits, 2yz to 5yz. */
const isReplyCode = (code: unknown): code is number =>
  Number.isInteger(code) && (code as number) >= 200 && (code as number) < 600;

/** The reply code at the start of a reply line. */
function replyCodeOf(reply: string): number | null {
  const code = Number(reply.trim().slice(0, 3));
  return isReplyCode(code) ? code : null;
}

/** A reply line as its parts. */
export function parseReply(reply: string): SmtpReply {
  const trimmed = reply.trim();
  return { replyCode: replyCodeOf(trimmed), enhancedStatus: enhancedStatusOf(trimmed), reply: trimmed };
}

/** What an error says: the server's reply when there was one, the error's message otherwise. */
export function replyOfError(error: SmtpError): SmtpReply {
  const reply = (error.response ?? error.message ?? 'no reply').trim();
  // nodemailer takes every leading digit as the code: a server answering `55555555555 …` is answering nothing.
  const replyCode = isReplyCode(error.responseCode) ? error.responseCode : null;
  return { replyCode, enhancedStatus: replyCode === null ? null : enhancedStatusOf(reply), reply };
}

/**
 * Where a queue id is looked for: a reply line's 512 octets (RFC 5321 4.5.3.1.5), where servers put it. The bare-id
 * pattern's `\s+` and `[: ]*` can share the same spaces, which a server's reply of 64,000 of them made take 6 s.
 */
const QUEUE_ID_SEARCHED_LENGTH = 512;

/** The provider's queue id if the 250 reply carries one (`250 2.0.0 Ok: queued as 4BZ1x2`). */
export function providerMessageIdOf(reply: string): string | null {
  const trimmed = reply.trim();
  const searched = trimmed.slice(0, QUEUE_ID_SEARCHED_LENGTH);
  for (const pattern of QUEUE_ID_PATTERNS) {
    const match = pattern.exec(searched);
    // An id the cut ends may go on past it: none rather than a part of one.
    const cutShort = match !== null && match.index + match[0].length === searched.length && searched !== trimmed;
    if (match) return cutShort ? null : match[1];
  }
  return null;
}

/**
 * What a reply to a recipient (at RCPT), or to the message (at DATA or after the final dot), means for the
 * recipients it covers. 5yz is final, except X.2.2 (mailbox full, transient even with a 5yz, RFC 3463) and 503
 * (bad sequence of commands: the session went wrong, not the recipient).
 */
export function recipientStatusOf({ replyCode, enhancedStatus }: SmtpReply): Exclude<RecipientStatus, 'unknown'> {
  if (replyCode !== null && replyCode < 300) return 'accepted';
  if (replyCode === null || replyCode < 500) return 'deferred';
  if (replyCode === 503 || enhancedStatus?.endsWith('.2.2')) return 'deferred';
  return 'refused';
}

/**
 * Whether the server asks the sender to slow down: 421 with a policy status (4.7.x), or a reply that says rate,
 * throttling or too many messages or connections. The lane pauses rather than spend every row's attempts.
 */
export function asksToSlowDown({ replyCode, enhancedStatus, reply }: SmtpReply): boolean {
  if (replyCode === null || replyCode >= 500) return false;
  return (replyCode === 421 && !!enhancedStatus?.startsWith('4.7.')) || RATE_LIMIT_TEXT.test(reply);
}

/** 452 4.5.3: the transaction took as many recipients as the server allows; the rest go in another one. */
export function isTooManyRecipients({ replyCode, enhancedStatus, reply }: SmtpReply): boolean {
  return replyCode === 452 && (enhancedStatus === '4.5.3' || TOO_MANY_RECIPIENTS_TEXT.test(reply));
}
