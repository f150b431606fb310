import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import type { QueryBound, SqlClient, Statement } from '../database/sql-client.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { Settlement } from '../outbox/queue.types.js';
import { Settler } from './settler.js';

const settlement = (): Settlement => ({
  id: randomUUID(),
  lockToken: randomUUID(),
  attemptId: randomUUID(),
  status: 'sent',
  refundAttempt: 0,
  nextAttemptAt: null,
  lastError: null,
  replyCode: 250,
  enhancedStatus: '2.0.0',
  reply: '250 2.0.0 queued',
  providerMessageId: null,
  providerRequestId: null,
  providerAcceptedAt: null,
  deduplicatedByKey: false,
  acceptedRecipients: ['ann@example.com'],
  rejectedRecipients: [],
  attemptRecipients: [],
  sentAt: new Date(),
  outcome: 'sent',
  durationMs: 12,
  bounced: [],
  eventName: null,
  eventPayload: {},
});

interface SettleCall {
  ids: string[];
  bound: QueryBound | undefined;
  answer(): void;
}

/** A database that records each settle statement and applies it when the test says so. */
function heldDatabase(): { database: SqlClient; calls: SettleCall[] } {
  const calls: SettleCall[] = [];
  const database: SqlClient = {
    query<R>(_statement: Statement, values: readonly unknown[], bound?: QueryBound): Promise<R[]> {
      const inputs = JSON.parse(values[0] as string) as Array<{ id: string; lock_token: string }>;
      return new Promise<R[]>((resolve) =>
        calls.push({
          ids: inputs.map((input) => input.id),
          bound,
          answer: () =>
            resolve(inputs.map((input) => ({ id: input.id, lock_token: input.lock_token, event_id: null }) as R)),
        }),
      );
    },
  };
  return { database, calls };
}

const publisher = { isListenedTo: () => false } as unknown as MailEventPublisher;
const logger = { warn: () => undefined, error: () => undefined } as unknown as Logger;
const turn = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('Settler', () => {
  it('bounds a statement by the earliest deadline among its settlements', async () => {
    const { database, calls } = heldDatabase();
    const settler = new Settler(database, publisher, 30_000, logger);
    const [late, early] = [settlement(), settlement()];
    const start = performance.now();
    const settled = [settler.settle(late, start + 60_000), settler.settle(early, start + 20_000)];
    await turn();

    expect(calls).toHaveLength(1);
    expect(calls[0].ids).toEqual([late.id, early.id]);
    expect(calls[0].bound!.timeoutMs).toBeLessThanOrEqual(20_000);
    expect(calls[0].bound!.timeoutMs).toBeGreaterThan(19_000);
    calls[0].answer();
    expect(await Promise.all(settled)).toEqual([
      { applied: true, event: null },
      { applied: true, event: null },
    ]);
  });

  it('does not send a settlement whose deadline passed while it waited behind a statement, and gives up on it', async () => {
    const { database, calls } = heldDatabase();
    const settler = new Settler(database, publisher, 30_000, logger);
    const [first, waiting, patient] = [settlement(), settlement(), settlement()];
    const firstSettled = settler.settle(first, performance.now() + 60_000);
    await turn();
    // These wait for the first statement, which hangs past the deadline of one of them.
    const waitingSettled = settler.settle(waiting, performance.now() + 20);
    const patientSettled = settler.settle(patient, performance.now() + 60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    calls[0].answer();
    await turn();

    expect(calls.map((call) => call.ids)).toEqual([[first.id], [patient.id]]);
    calls[1].answer();
    expect(await waitingSettled).toBeNull();
    expect(await firstSettled).toEqual({ applied: true, event: null });
    expect(await patientSettled).toEqual({ applied: true, event: null });
  });
});
