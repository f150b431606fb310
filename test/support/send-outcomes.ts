import type { RecipientOutcome, SendOutcome } from '../../libs/reliable-mail/src/transport/mail-transport.interface.js';

/** What a transport reports when every recipient got the same reply. */
export function everyRecipient(
  addresses: string[],
  status: RecipientOutcome['status'],
  reply: string,
  replyCode: number | null,
  enhancedStatus: string | null = null,
): SendOutcome {
  return {
    kind: 'attempted',
    recipients: addresses.map((address) => ({
      address,
      status,
      reply,
      replyCode,
      enhancedStatus,
      perRecipient: addresses.length === 1,
    })),
    reply: status === 'accepted' ? reply : null,
    providerMessageId: null,
    slowDown: false,
  };
}
