import type { NewOutboxRow } from '../../libs/reliable-mail/src/outbox/queue.types.js';
import { uuidv7 } from '../../libs/reliable-mail/src/outbox/uuid-v7.js';

/** A row as an enqueue makes it: one recipient, an id of its own, a key when the test gives one. */
export function newRow(overrides: Partial<NewOutboxRow> = {}): NewOutboxRow {
  const id = uuidv7();
  return {
    id,
    idempotencyKey: null,
    contentHash: overrides.idempotencyKey ? 'hash' : null,
    messageId: `<${id}@rows.test>`,
    payload: {
      to: [{ address: 'ann@example.com' }],
      cc: [],
      bcc: [],
      subject: 'Order',
      text: 'Hello',
    } as never,
    metadata: null,
    maxAttempts: 5,
    lane: 'default',
    notBefore: null,
    expiresAt: null,
    ...overrides,
  };
}
