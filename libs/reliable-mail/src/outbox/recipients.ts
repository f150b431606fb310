import type { MailPayload } from './mail.types.js';

/** Every envelope recipient of a payload, in order. */
export function recipientsOf(payload: MailPayload): string[] {
  return [...payload.to, ...payload.cc, ...payload.bcc].map((recipient) => recipient.address);
}
