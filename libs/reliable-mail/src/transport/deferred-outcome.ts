import type { SendOutcome } from './mail-transport.interface.js';

/** An attempt that reached no server: every recipient deferred with `reason`, to be tried again. */
export function everyRecipientDeferred(
  recipients: string[],
  reason: string,
  { slowDown = false }: { slowDown?: boolean } = {},
): SendOutcome {
  return {
    kind: 'attempted',
    recipients: recipients.map((address) => ({
      address,
      status: 'deferred',
      replyCode: null,
      enhancedStatus: null,
      reply: reason,
      perRecipient: false,
    })),
    reply: null,
    providerMessageId: null,
    slowDown,
  };
}
