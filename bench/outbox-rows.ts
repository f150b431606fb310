// An outbox row as an enqueue makes it, with one of the bench's mails: for the benches that call the library's SQL
// steps themselves (bench/insert.ts, bench/claim-one.ts) rather than an app's enqueue.
import type { MailPayload } from '../libs/reliable-mail/src/outbox/mail.types.js';
import type { NewOutboxRow } from '../libs/reliable-mail/src/outbox/queue.types.js';
import { uuidv7 } from '../libs/reliable-mail/src/outbox/uuid-v7.js';
import { mailFor } from './common.js';

export function benchRow(index: number, tag: string, keyed = false): NewOutboxRow {
  const { to, subject, text } = mailFor(index, tag);
  const id = uuidv7();
  return {
    id,
    idempotencyKey: keyed ? `${tag}-${id}` : null,
    contentHash: keyed ? 'hash' : null,
    messageId: `<${id}@bench.example.com>`,
    payload: { to: [{ address: to }], cc: [], bcc: [], subject, text } as unknown as MailPayload,
    metadata: null,
    maxAttempts: 5,
    lane: 'default',
    notBefore: null,
    expiresAt: null,
  };
}
