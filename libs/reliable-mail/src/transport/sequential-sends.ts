import { deferredRecipient } from './deferred-outcome.js';
import type { RecipientOutcome, SendOutcome } from './mail-transport.interface.js';

// An attempt that goes out in several sends, one after another, each with the same message and Message-ID: a
// provider's requests of at most 50 recipients (http/send-in-requests.ts), or each recipient's own copy on a lane
// that is not transactional (dispatch/delivery.ts). What came of those sends makes the attempt's one `SendOutcome`.

/** One of the sends of an attempt: its recipients and what came of it. */
export interface SendPart {
  recipients: string[];
  outcome: SendOutcome;
}

/**
 * Whether the attempt makes its next send: every recipient of this one took the message or was refused for good,
 * and nobody asked to slow down. After a deferral, an unknown outcome, a throttle or an outage the rest wait for the
 * next attempt, as SMTP's do after a failed transaction.
 */
export function nextSendGoes(outcome: SendOutcome): boolean {
  return (
    outcome.kind === 'attempted' &&
    !outcome.slowDown &&
    outcome.recipients.every(({ status }) => status === 'accepted' || status === 'refused')
  );
}

/** What a send that stopped the attempt came to: `deferred: 503 unavailable: …`. */
export function stopReasonOf(outcome: SendOutcome): string {
  if (outcome.kind === 'outage') return `outage: ${outcome.reply}`;
  const unsettled = outcome.recipients.find(({ status }) => status !== 'accepted' && status !== 'refused');
  const { status, reply } = unsettled ?? outcome.recipients[0] ?? { status: 'deferred', reply: null };
  return `${outcome.slowDown ? 'slow down' : status}: ${reply ?? 'no reply'}`;
}

/**
 * The attempt's outcome from its sends' outcomes, in the order they were made, and the recipients left untried
 * (deferred, with `untriedReply`). An outage of the first send is the whole attempt's: nothing was taken, and the
 * lane pauses. A single send with nothing left untried is its own outcome, as it is. Otherwise each recipient is
 * reported once: as its send's outcome said, an outage's recipients deferred. The reply, the provider's ids, the
 * accept time and the transport are the first accepting send's (the request id and the transport, when none
 * accepted, the last send's); `slowDown`, `heldBack` and `stoppedAtShutdown` if any said so; `deduplicatedByKey` if
 * every send was; `retryAfterMs` the longest any asked for.
 */
export function mergeSendParts(sent: SendPart[], untried: string[], untriedReply: string): SendOutcome {
  const [first] = sent;
  if (first.outcome.kind === 'outage' || (sent.length === 1 && untried.length === 0)) return first.outcome;
  const recipients: RecipientOutcome[] = [];
  const attempted: Array<Extract<SendOutcome, { kind: 'attempted' }>> = [];
  for (const { recipients: envelope, outcome } of sent) {
    if (outcome.kind === 'attempted') {
      attempted.push(outcome);
      recipients.push(...outcome.recipients);
    } else recipients.push(...envelope.map((address) => deferredRecipient(address, outcome.reply, outcome.replyCode)));
  }
  recipients.push(...untried.map((address) => deferredRecipient(address, untriedReply)));
  const accepting = attempted.find((outcome) => outcome.recipients.some(({ status }) => status === 'accepted'));
  const reporting = accepting ?? sent[sent.length - 1].outcome;
  const retryAfters = sent.flatMap(({ outcome }) => (outcome.retryAfterMs === undefined ? [] : [outcome.retryAfterMs]));
  return {
    kind: 'attempted',
    recipients,
    reply: accepting?.reply ?? null,
    providerMessageId: accepting?.providerMessageId ?? null,
    providerRequestId: reporting.providerRequestId ?? null,
    acceptedAt: accepting?.acceptedAt ?? null,
    deduplicatedByKey: attempted.every((outcome) => outcome.deduplicatedByKey === true),
    slowDown: attempted.some((outcome) => outcome.slowDown),
    ...(retryAfters.length > 0 && { retryAfterMs: Math.max(...retryAfters) }),
    ...(attempted.some((outcome) => outcome.heldBack) && { heldBack: true }),
    ...(attempted.some((outcome) => outcome.stoppedAtShutdown) && { stoppedAtShutdown: true }),
    ...(reporting.transport !== undefined && { transport: reporting.transport }),
  };
}
