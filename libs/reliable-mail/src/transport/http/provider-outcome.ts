import type { OutboundMessage, RecipientStatus, SendOutcome } from '../mail-transport.interface.js';
import { type AttachmentBytes, attachmentBytes, releaseAttachmentStreams } from '../outbound-content.js';

// What an HTTP provider's answer means, in one shape for every provider: each provider's pure classification
// function (ses-classification.ts, postmark-classification.ts, resend-classification.ts) maps its statuses and
// error names to a `ProviderVerdict`, and `outcomeOf` makes the transport's `SendOutcome` of it.

/** What a provider's refusal, or a request without an answer, means for the message. */
export interface ProviderVerdict {
  /**
   * `outage`: the account or the credentials refuse every message (the lane pauses, the row is not charged);
   * otherwise what becomes of every recipient of the request not named in `refusedRecipients`.
   */
  status: Exclude<RecipientStatus, 'accepted'> | 'outage';
  /** Recipients the provider refused by name (inactive, unverified): refused alone, for good. */
  refusedRecipients: string[];
  /** The provider asks to slow down (HTTP 429, throttling): the lane pauses. */
  slowDown: boolean;
  /** The HTTP status; null when no answer came. */
  replyCode: number | null;
  /** `<status> <error name>: <message>`, or what the network did. */
  reply: string;
}

/**
 * Network errors that prove the request never reached the provider: nothing listens, the name does not resolve,
 * no route, or the connection could not be set up in time. Any other failure once the request was under way (a
 * reset, a closed socket, a timeout or the send deadline while waiting for the answer) may come after the
 * provider took the message.
 */
const NOT_CONNECTED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_INVALID_URL',
]);

/** The request was never made (the message could not be built in time): every recipient is deferred. */
export function notSent(reason: string): ProviderVerdict {
  return { status: 'deferred', refusedRecipients: [], slowDown: false, replyCode: null, reply: reason };
}

/**
 * Node's own text for a connection that could not be set up (`connect ECONNREFUSED 127.0.0.1:443`, `getaddrinfo
 * ENOTFOUND host`), for an error that lost its code on the way: the AWS SDK wraps an error of another realm (jest's
 * VM, a vm context) as `AWS SDK error wrapper for Error: connect ECONNREFUSED …`, which is only its text.
 */
const NOT_CONNECTED_TEXT = /\b(?:connect|getaddrinfo) (ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)\b/;

/** A request that got no answer: `deferred` if it never reached the provider, `unknown` otherwise. */
export function networkFailure(code: string | null | undefined, message: string): ProviderVerdict {
  const reply = code && !message.includes(code) ? `${message} (${code})` : message;
  const notConnected = code ? NOT_CONNECTED_CODES.has(code) : NOT_CONNECTED_TEXT.test(message);
  if (notConnected) return notSent(reply);
  return { ...notSent(reply), status: 'unknown' };
}

/**
 * What a provider's 5xx makes of its request's recipients. A 503 says the request was not taken in (RFC 9110
 * §15.6.4: unavailable, maintenance): deferred, and a failover lane may send it through its next transport. Any other
 * may come after the message was stored (SES's InternalFailure, Postmark's and Resend's internal_server_error say
 * nothing of it, and a 502 or 504 comes from a gateway whose backend may have taken it): unknown, as a request whose
 * answer was lost, so that its retry goes through the same transport alone, with the same Message-ID (and Resend's
 * key), and a copy the provider kept arrives at most twice, from that provider.
 */
export const serverErrorStatus = (status: number): 'deferred' | 'unknown' => (status === 503 ? 'deferred' : 'unknown');

/** A status and error the provider named, as the reply recorded for it. */
export function replyOf(status: number, name: string, message: string): string {
  return `${status} ${name}: ${message}`.trim();
}

/** Verdicts on one answer of the provider: `answer('deferred', { slowDown: true })`. */
export function verdictsOn(replyCode: number | null, reply: string) {
  return (status: ProviderVerdict['status'], extra: Partial<ProviderVerdict> = {}): ProviderVerdict => ({
    status,
    refusedRecipients: [],
    slowDown: false,
    replyCode,
    reply,
    ...extra,
  });
}

/** The attachments' bytes for a JSON API, or the outcome of a send that could not read them in time. */
export async function attachmentsOrOutcome(
  message: OutboundMessage,
  signal: AbortSignal,
): Promise<{ attachments: AttachmentBytes[] } | { outcome: SendOutcome }> {
  try {
    return { attachments: await attachmentBytes(message.mail, signal) };
  } catch (error) {
    const verdict = notSent((error as Error).message);
    return { outcome: outcomeOf(message.recipients, verdict, { providerRequestId: null, deduplicatedByKey: false }) };
  } finally {
    releaseAttachmentStreams(message.mail);
  }
}

interface RequestFacts {
  providerRequestId: string | null;
  deduplicatedByKey: boolean;
  /** The answer's Retry-After (see `retryAfterMs`), if it had one. */
  retryAfterMs?: number;
}

/** The outcome of a request the provider refused or did not answer. */
export function outcomeOf(recipients: string[], verdict: ProviderVerdict, request: RequestFacts): SendOutcome {
  // A Retry-After counts on an answer that asks to be asked again (a 429, a 503, an account paused for now); on a
  // refusal there is nothing to retry.
  const retryAfter =
    request.retryAfterMs !== undefined && verdict.status !== 'refused' ? { retryAfterMs: request.retryAfterMs } : {};
  if (verdict.status === 'outage') {
    return {
      kind: 'outage',
      replyCode: verdict.replyCode,
      enhancedStatus: null,
      reply: verdict.reply,
      providerRequestId: request.providerRequestId,
      ...retryAfter,
    };
  }
  const refused = new Set(verdict.refusedRecipients.map((address) => address.toLowerCase()));
  const status = verdict.status;
  return {
    kind: 'attempted',
    recipients: recipients.map((address) => ({
      address,
      status: refused.has(address) ? 'refused' : status,
      replyCode: verdict.replyCode,
      enhancedStatus: null,
      reply: verdict.reply,
      perRecipient: refused.has(address) || recipients.length === 1,
    })),
    reply: null,
    providerMessageId: null,
    providerRequestId: request.providerRequestId,
    acceptedAt: null,
    deduplicatedByKey: request.deduplicatedByKey,
    slowDown: verdict.slowDown,
    ...retryAfter,
  };
}

/** Recipients a provider's 200 names as ones it will not deliver to (Postmark's inactive addresses). */
interface RefusedInAnswer {
  recipients: string[];
  reply: string;
}

/**
 * The outcome of a request the provider took: for every recipient, but those it named in its answer as ones it will
 * not deliver to, refused by name (for this mail, and not suppressed: the provider keeps its own list).
 */
export function acceptedOutcome(
  recipients: string[],
  accepted: { reply: string; replyCode?: number; providerMessageId: string | null; acceptedAt: Date } & RequestFacts,
  refused: RefusedInAnswer = { recipients: [], reply: '' },
): SendOutcome {
  const refusedByName = new Set(refused.recipients);
  return {
    kind: 'attempted',
    recipients: recipients.map((address) =>
      refusedByName.has(address)
        ? { address, status: 'refused', replyCode: 200, enhancedStatus: null, reply: refused.reply, perRecipient: true }
        : {
            address,
            status: 'accepted',
            replyCode: accepted.replyCode ?? 200,
            enhancedStatus: null,
            reply: accepted.reply,
            perRecipient: recipients.length === 1,
            providerMessageId: accepted.providerMessageId,
          },
    ),
    reply: accepted.reply,
    providerMessageId: accepted.providerMessageId,
    providerRequestId: accepted.providerRequestId,
    acceptedAt: accepted.acceptedAt,
    deduplicatedByKey: accepted.deduplicatedByKey,
    slowDown: false,
  };
}
