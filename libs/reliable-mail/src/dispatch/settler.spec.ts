import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import pg from 'pg';
import type { QueryBound, SqlClient, Statement } from '../database/sql-client.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { Settlement } from '../outbox/queue.types.js';
import { Settler } from './settler.js';
import { sentSettlement } from '../../../../test/support/settlements.js';

const settlement = (): Settlement => sentSettlement();

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

const publisher = { recordingOf: () => null, committed: () => undefined } as unknown as MailEventPublisher;
const logger = { warn: () => undefined, error: () => undefined } as unknown as Logger;
const turn = () => new Promise((resolve) => setTimeout(resolve, 5));

/** A database that applies each settle statement at once, unless it holds `poisoned`: then PostgreSQL refuses it. */
function refusingDatabase(poisoned: string): { database: SqlClient; calls: string[][] } {
  const calls: string[][] = [];
  const database: SqlClient = {
    async query<R>(_statement: Statement, values: readonly unknown[]): Promise<R[]> {
      const inputs = JSON.parse(values[0] as string) as Array<{ id: string; lock_token: string; reply: string }>;
      calls.push(inputs.map((input) => input.id));
      if (inputs.some((input) => input.reply === poisoned))
        throw Object.assign(new pg.DatabaseError('invalid input syntax for type json', 0, 'error'), { code: '22P02' });
      return inputs.map((input) => ({ id: input.id, lock_token: input.lock_token, event_id: null }) as R);
    },
  };
  return { database, calls };
}

/** A statement's bound, as `statementBoundMs` gives it for the default statement timeout. */
const BOUND_MS = 35_000;

describe('Settler', () => {
  it("settles one with less than a statement's bound left alone, bounded by its deadline; the others share a statement with the whole bound", async () => {
    const { database, calls } = heldDatabase();
    const settler = new Settler(database, publisher, 30_000, BOUND_MS, logger);
    const [late, near, later] = [settlement(), settlement(), settlement()];
    const start = performance.now();
    const settled = [
      settler.settle(late, start + 60_000),
      settler.settle(near, start + 20_000),
      settler.settle(later, start + 90_000),
    ];
    await turn();

    expect(calls.map((call) => call.ids)).toEqual([[near.id], [late.id, later.id]]);
    expect(calls[0].bound!.timeoutMs).toBeLessThanOrEqual(20_000);
    expect(calls[0].bound!.timeoutMs).toBeGreaterThan(19_000);
    // Bounded by the earlier of its two deadlines, not by the near one's: the database caps it at its own bound.
    expect(calls[1].bound!.timeoutMs).toBeGreaterThan(59_000);
    for (const call of calls) call.answer();
    expect(await Promise.all(settled)).toEqual([
      { applied: true, event: null },
      { applied: true, event: null },
      { applied: true, event: null },
    ]);
  });

  it("one whose lease came within a statement's bound of its end while it waited is settled alone at once, not after the shared statement", async () => {
    const { database, calls } = heldDatabase();
    const settler = new Settler(database, publisher, 30_000, BOUND_MS, logger);
    const [first, nearing, patient] = [settlement(), settlement(), settlement()];
    const firstSettled = settler.settle(first, performance.now() + 60_000);
    await turn();
    // A whole bound left when they are added, behind a statement that takes a while.
    const nearingSettled = settler.settle(nearing, performance.now() + BOUND_MS + 30);
    const patientSettled = settler.settle(patient, performance.now() + 60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    calls[0].answer();
    await turn();

    expect(calls.map((call) => call.ids)).toEqual([[first.id], [nearing.id], [patient.id]]);
    expect(calls[1].bound!.timeoutMs).toBeLessThan(BOUND_MS);
    // Its answer is passed on while the shared statement still waits for its own.
    calls[1].answer();
    expect(await nearingSettled).toEqual({ applied: true, event: null });
    calls[2].answer();
    expect(await Promise.all([firstSettled, patientSettled])).toEqual([
      { applied: true, event: null },
      { applied: true, event: null },
    ]);
  });

  it('does not send a settlement whose deadline passed while it waited behind a statement, and gives up on it', async () => {
    const { database, calls } = heldDatabase();
    const settler = new Settler(database, publisher, 30_000, 10, logger);
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

  it('a settlement JSON cannot write (what a transport left on a recipient) is written with a note, in the same batch as the others', async () => {
    const { database, calls } = heldDatabase();
    const errors: unknown[] = [];
    const settler = new Settler(database, publisher, 30_000, BOUND_MS, {
      ...logger,
      error: (entry: unknown) => errors.push(entry),
    } as unknown as Logger);
    const recipient = {
      address: 'ann@example.com',
      status: 'accepted' as const,
      replyCode: 250,
      enhancedStatus: '2.0.0',
      reply: '250 2.0.0 queued',
      perRecipient: true,
    };
    const good = [settlement(), settlement()];
    const poisoned = { ...settlement(), attemptRecipients: [{ ...recipient, trace: 10n }] };
    const deadline = performance.now() + 60_000;
    const settled = [
      settler.settle(good[0], deadline),
      settler.settle(poisoned, deadline),
      settler.settle(good[1], deadline),
    ];
    await turn();

    expect(calls.map((call) => call.ids)).toEqual([[good[0].id, poisoned.id, good[1].id]]);
    calls[0].answer();
    expect(await Promise.all(settled)).toEqual(good.concat(poisoned).map(() => ({ applied: true, event: null })));
    expect(errors).toEqual([
      expect.objectContaining({ msg: expect.stringContaining('cannot be written as JSON'), id: poisoned.id }),
    ]);
  });

  it("a batch PostgreSQL refuses for one settlement's values: each written alone, only that one with a note", async () => {
    const { database, calls } = refusingDatabase('refused');
    const settler = new Settler(database, publisher, 30_000, BOUND_MS, logger);
    const batch = [settlement(), { ...settlement(), reply: 'refused' }, settlement()];
    const deadline = performance.now() + 60_000;

    const settled = await Promise.all(batch.map((each) => settler.settle(each, deadline)));

    expect(settled).toEqual(batch.map(() => ({ applied: true, event: null })));
    const [a, refused, c] = batch.map(({ id }) => id);
    // The batch, each alone (the refused one refused again), then the refused one with its note.
    expect(calls).toEqual([[a, refused, c], [a], [refused], [c], [refused]]);
  });
});
