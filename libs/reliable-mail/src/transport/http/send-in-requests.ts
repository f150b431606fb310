import type { OutboundMessage, SendOutcome } from '../mail-transport.interface.js';
import { everyRecipientDeferred } from '../deferred-outcome.js';
import { addressedTo } from '../outbound-content.js';
import { mergeSendParts, nextSendGoes, type SendPart, stopReasonOf } from '../sequential-sends.js';
import type { RequestPacer } from './request-pacer.js';

// A provider API takes a message to at most so many recipients in one request (SES, Postmark and Resend: 50), and
// refuses a larger request outright. An attempt to more goes out in several requests, one after another, each with
// the same message and Message-ID, as SMTP sends it in several transactions (smtp-conversation.ts), and the
// outcomes of those requests make the attempt's one `SendOutcome`.

/** How a provider's API takes the recipients of one request. */
export interface RequestLimits {
  /** The most recipients (To, Cc and Bcc together) one request takes. */
  limit: number;
  /**
   * The API refuses a request without a To (Postmark and Resend; SES takes one with only Bcc). A request whose
   * recipients are all Bcc then goes to one of them alone, as its To (see `requestAddressing`).
   */
  toRequired: boolean;
  /**
   * Spaces the transport's requests by the provider's rate limit (Resend), and holds them all back for as long as a
   * provider's Retry-After asks (`SendOutcome.retryAfterMs`).
   */
  pacer?: RequestPacer;
}

/**
 * The recipients of an attempt in the requests they go out in: at most `limit` in each, the mail's To and Cc first
 * and then its Bcc, each in the mail's order. A JSON API makes a request's To and Cc of its own recipients, so the To
 * and Cc recipients share the first request (and see each other, as they would in one) whenever they fit in it.
 * Where the API requires a To, the Bcc recipients left over once the To and Cc are placed go one to a request: a mail
 * to 1 To and 149 Bcc is one request of 50 and 100 of one.
 */
export function requestEnvelopes(
  message: Pick<OutboundMessage, 'mail' | 'recipients'>,
  { limit, toRequired }: RequestLimits,
): string[][] {
  const { to, cc, bcc } = addressedTo(message.mail, message.recipients);
  const lower = ({ address }: { address: string }) => address.toLowerCase();
  const visible = new Set([...to, ...cc].map(lower));
  const ordered = [...to, ...cc, ...bcc].map(lower);
  // A recipient the mail does not name (none should be) still goes in a request: each is reported once.
  const named = new Set(ordered);
  ordered.push(...message.recipients.filter((address) => !named.has(address)));
  const envelopes: string[][] = [];
  for (let start = 0; start < ordered.length; start += limit) {
    const envelope = ordered.slice(start, start + limit);
    if (toRequired && !envelope.some((address) => visible.has(address)))
      envelopes.push(...envelope.map((address) => [address]));
    else envelopes.push(envelope);
  }
  return envelopes;
}

/**
 * A send the pacer held back before request `index + 1` of `count`: no slot before the send's deadline (a provider's
 * Retry-After, or its rate limit). What went before is recorded and the rest were not tried, not charged
 * (`heldBack`): the lane waits until a slot could come (`retryAfterMs`), and the row goes again then.
 */
function heldBack(sent: SendPart[], untried: string[], heldForMs: number, index: number, count: number): SendOutcome {
  const why = `not tried in this attempt: the provider's Retry-After or rate limit allows no request before the send deadline (the next in ${heldForMs} ms)`;
  if (sent.length === 0) {
    return { ...everyRecipientDeferred(untried, why, { slowDown: true }), retryAfterMs: heldForMs, heldBack: true };
  }
  const merged = mergeSendParts(sent, untried, `${why}, after request ${index} of ${count}`);
  if (merged.kind === 'outage') return merged;
  return { ...merged, retryAfterMs: Math.max(merged.retryAfterMs ?? 0, heldForMs), heldBack: true };
}

/**
 * An attempt that made no request: the send deadline passed while it waited for its slot (a transport that was not
 * given the deadline, or a timer that fired early).
 */
function noRequestMade(recipients: string[]): SendOutcome {
  // More is asked of the provider than its rate limit allows, or it asked to wait: the lane slows down.
  return everyRecipientDeferred(
    recipients,
    "not tried in this attempt: the send deadline passed while it waited for the provider's rate limit or Retry-After",
    { slowDown: true },
  );
}

/**
 * Sends `message` to its recipients in the requests `requestEnvelopes` makes of them (`send` makes one request to
 * the recipients it is given, and reports every one of them), each in its slot of the `pacer`, one after another
 * while each is taken or refused for good and the send's deadline and the app's shutdown (`message.stopping`) allow,
 * and merges what came of them. A send of one request has that request's outcome as it is.
 */
export async function sendInRequests(
  message: OutboundMessage,
  limits: RequestLimits,
  signal: AbortSignal,
  send: (recipients: string[]) => Promise<SendOutcome>,
): Promise<SendOutcome> {
  const envelopes = requestEnvelopes(message, limits);
  // Shutdown stops a send between its requests, never before the first: a send that has started makes at least one
  // request, within its deadline, so that the row is not charged for nothing.
  const stopping = message.stopping;
  let between: AbortSignal | undefined;
  const sent: SendPart[] = [];
  for (const [index, recipients] of envelopes.entries()) {
    if (index > 0 && (signal.aborted || stopping?.aborted)) break;
    if (limits.pacer) {
      // The wait for a later request's slot ends at the deadline or at shutdown.
      const waitOver = index === 0 || !stopping ? signal : (between ??= AbortSignal.any([signal, stopping]));
      const msLeft = message.deadlineAt === undefined ? Infinity : message.deadlineAt - Date.now();
      const slot = await limits.pacer.take(waitOver, msLeft);
      if (!slot.taken) {
        if (slot.heldForMs !== null) {
          return heldBack(sent, envelopes.slice(index).flat(), slot.heldForMs, index, envelopes.length);
        }
        if (index === 0) return noRequestMade(message.recipients);
        break;
      }
    }
    let outcome: SendOutcome;
    try {
      outcome = await send(recipients);
    } catch (error) {
      // A transport's own fault, in this request only: the requests before it stay as they were taken.
      outcome = everyRecipientDeferred(recipients, `the transport failed: ${String(error)}`);
    }
    if (outcome.retryAfterMs !== undefined) limits.pacer?.holdFor(outcome.retryAfterMs);
    sent.push({ recipients, outcome });
    if (index === envelopes.length - 1) return mergeSendParts(sent, [], '');
    if (!nextSendGoes(outcome)) {
      const why = `request ${index + 1} of ${envelopes.length} was not taken (${stopReasonOf(outcome)})`;
      return mergeSendParts(sent, envelopes.slice(index + 1).flat(), `not tried in this attempt: ${why}`);
    }
  }
  const untried = envelopes.slice(sent.length).flat();
  const of = `request ${sent.length} of ${envelopes.length}`;
  if (signal.aborted)
    return mergeSendParts(sent, untried, `not tried in this attempt: the send deadline passed after ${of}`);
  const merged = mergeSendParts(sent, untried, `not tried in this attempt: the app shut down after ${of}`);
  return merged.kind === 'attempted' ? { ...merged, stoppedAtShutdown: true } : merged;
}
