import { randomUUID } from 'node:crypto';
import { Webhook } from 'svix';

export const RESEND_SECRET = `whsec_${Buffer.from('reliable-mail resend test secret').toString('base64')}`;

/** The headers with which Svix posts `body`: its id, its time, and its signature. */
export function svixHeaders(
  body: string,
  { id = `msg_${randomUUID()}`, at = new Date(), secret = RESEND_SECRET } = {},
) {
  return {
    'content-type': 'application/json',
    'svix-id': id,
    'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
    'svix-signature': new Webhook(secret).sign(id, at, body),
  };
}

/** A Resend event about the email Resend knows as `emailId`, signed as Svix signs it. */
export function signedResendEvent(
  type: string,
  emailId: string,
  to: string[],
  data: Record<string, unknown> = {},
  signing: Parameters<typeof svixHeaders>[1] = {},
) {
  const body = JSON.stringify({
    type,
    created_at: '2026-12-03T10:00:00.000Z',
    data: { email_id: emailId, from: 'shop@example.com', to, subject: 'Your order', ...data },
  });
  return { body, headers: svixHeaders(body, signing) };
}
