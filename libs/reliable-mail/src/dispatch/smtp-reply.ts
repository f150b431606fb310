import type { RejectedRecipient } from '../outbox/mail.types.js';
import type { DeliveryReport, SmtpFailure } from '../transport/mail-transport.interface.js';

/** The outcome of one SMTP attempt, as the outbox must act on it. */
export type SmtpVerdict =
  | {
      kind: 'sent';
      replyCode: number | null;
      enhancedStatus: string | null;
      reply: string;
      providerMessageId: string | null;
      accepted: string[];
      rejected: RejectedRecipient[];
    }
  | {
      /** Try again later with the same Message-ID. */
      kind: 'transient';
      replyCode: number | null;
      enhancedStatus: string | null;
      reply: string;
      /** The server may have taken the message (the connection was lost after it was established). */
      outcomeUnknown: boolean;
      /** The server asks the sender to slow down (421, 454, 4.7.x, rate limits). */
      slowDown: boolean;
    }
  | {
      /** The recipient cannot get this message; do not repeat it. */
      kind: 'permanent';
      replyCode: number | null;
      enhancedStatus: string | null;
      reply: string;
      /** The address does not exist (X.1.1, X.1.2, X.1.3, X.1.6): it belongs on a suppression list. */
      hardBounce: boolean;
      /** The recipients the server named as hard bounces; null when the reply covers every recipient. */
      bouncedRecipients: string[] | null;
    }
  | {
      /** The sender's side is wrong (authentication, configuration, sender refused): no fault of this message. */
      kind: 'sender';
      replyCode: number | null;
      enhancedStatus: string | null;
      reply: string;
    };

const ENHANCED_STATUS_PATTERN = /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})\b/;
const QUEUE_ID_PATTERNS = [
  /\bqueued as ([\w.@<>-]+)/i, // Postfix, Exim
  /\bid=([\w.@<>-]+)/i,
  /^250 2\.0\.0 OK\s+\d+\s+(\S+) - gsmtp/i, // Gmail: a timestamp, then the id
  /^\d{3}[ -](?:\d\.\d\.\d\s+)?(?:ok|accepted)?[: ]*(?=[\w.-]*\d)([0-9A-F][\w.-]{7,})/i, // Amazon SES and other bare ids
];
const HARD_BOUNCE_STATUSES = new Set(['5.1.1', '5.1.2', '5.1.3', '5.1.6']);
const NO_CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const SENDER_COMMANDS = /^(AUTH|MAIL FROM|EHLO|HELO|STARTTLS)\b/i;
const SENDER_CODES = new Set(['EAUTH', 'ENOAUTH', 'EOAUTH2', 'ECONFIG', 'EREQUIRETLS']);
// "Try again later" is not here: it is the wording of every ordinary 4yz, greylisting included.
const RATE_LIMIT_TEXT = /rate.?limit|too many|throttl|slow down/i;

/** The RFC 3463 enhanced status code at the start of a reply line, such as `5.1.1`. */
export function enhancedStatusOf(reply: string | undefined): string | null {
  return reply ? (ENHANCED_STATUS_PATTERN.exec(reply.trim())?.[1] ?? null) : null;
}

/** The provider's queue id if the 250 reply carries one (`250 2.0.0 Ok: queued as 4BZ1x2`). */
export function providerMessageIdOf(reply: string): string | null {
  for (const pattern of QUEUE_ID_PATTERNS) {
    const match = pattern.exec(reply.trim());
    if (match) return match[1];
  }
  return null;
}

function replyCodeOf(reply: string): number | null {
  const code = Number(reply.trim().slice(0, 3));
  return Number.isInteger(code) && code >= 200 && code < 600 ? code : null;
}

export function classifyDelivery(report: DeliveryReport): SmtpVerdict {
  return {
    kind: 'sent',
    replyCode: replyCodeOf(report.response),
    enhancedStatus: enhancedStatusOf(report.response),
    reply: report.response,
    providerMessageId: providerMessageIdOf(report.response),
    accepted: report.accepted,
    rejected: report.rejected,
  };
}

/** Whether a reply line says the address does not exist (RFC 3463 X.1.1, X.1.2, X.1.3, X.1.6 with a 5yz). */
export function isHardBounce(reply: string | null | undefined): boolean {
  return HARD_BOUNCE_STATUSES.has(enhancedStatusOf(reply ?? undefined) ?? '');
}

/** nodemailer's error, with the per-recipient replies it attaches when every recipient was refused at RCPT. */
export type SmtpFailureDetails = SmtpFailure & {
  errno?: string | number;
  rejectedErrors?: Array<{ recipient?: string; response?: string }>;
};

/** Classifies a failed send by RFC 5321 reply class and RFC 3463 enhanced status (see FAILURE-MODES in the README). */
export function classifyFailure(failure: SmtpFailureDetails): SmtpVerdict {
  const replyCode = typeof failure.responseCode === 'number' ? failure.responseCode : null;
  const reply = (failure.response ?? failure.message ?? '').trim();
  const enhancedStatus = enhancedStatusOf(failure.response);
  const base = { replyCode, enhancedStatus, reply };

  if (SENDER_CODES.has(failure.code ?? '') || replyCode === 530 || replyCode === 535) {
    return { kind: 'sender', ...base };
  }
  if (replyCode !== null && replyCode >= 500) {
    // RFC 3463: X.2.2 (mailbox full) is transient even when a server sends it with a 5yz code.
    if (enhancedStatus?.endsWith('.2.2')) {
      return { kind: 'transient', ...base, outcomeUnknown: false, slowDown: false };
    }
    // A 5yz to the sender's own commands is about the sender; to RCPT or the message (554 5.7.1 spam) it is final.
    if (SENDER_COMMANDS.test(failure.command ?? '')) {
      return { kind: 'sender', ...base };
    }
    const perRecipient = failure.rejectedErrors?.filter((error) => error.recipient && isHardBounce(error.response));
    return {
      kind: 'permanent',
      ...base,
      hardBounce: HARD_BOUNCE_STATUSES.has(enhancedStatus ?? '') || !!perRecipient?.length,
      bouncedRecipients: failure.rejectedErrors
        ? (perRecipient ?? []).map((error) => error.recipient!.toLowerCase())
        : null,
    };
  }
  if (replyCode !== null && replyCode >= 400) {
    const slowDown =
      replyCode === 421 || replyCode === 454 || !!enhancedStatus?.startsWith('4.7.') || RATE_LIMIT_TEXT.test(reply);
    return { kind: 'transient', ...base, outcomeUnknown: false, slowDown };
  }
  // No reply code: the connection failed. Before it was established nothing was sent; after, a drop or a timeout
  // cannot be told apart from one after the final dot, so the server may hold the message (RFC 1047).
  const neverConnected =
    failure.code === 'EDNS' ||
    NO_CONNECTION_ERRNOS.has(String(failure.errno ?? '')) ||
    /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(failure.message ?? '');
  return { kind: 'transient', ...base, outcomeUnknown: !neverConnected, slowDown: false };
}
