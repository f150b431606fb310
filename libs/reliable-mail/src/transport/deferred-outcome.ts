import type { RecipientOutcome, SendOutcome } from './mail-transport.interface.js';

/** A recipient not reached, to be tried again: with `reply` saying why, and the reply code when one came. */
export function deferredRecipient(address: string, reply: string, replyCode: number | null = null): RecipientOutcome {
  return { address, status: 'deferred', replyCode, enhancedStatus: null, reply, perRecipient: false };
}

/** An attempt that reached no server: every recipient deferred with `reason`, to be tried again. */
export function everyRecipientDeferred(
  recipients: string[],
  reason: string,
  { slowDown = false }: { slowDown?: boolean } = {},
): Extract<SendOutcome, { kind: 'attempted' }> {
  return {
    kind: 'attempted',
    recipients: recipients.map((address) => deferredRecipient(address, reason)),
    reply: null,
    providerMessageId: null,
    slowDown,
  };
}
