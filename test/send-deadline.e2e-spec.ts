import { describe, expect, it } from '@jest/globals';
import {
  MailOutboxService,
  type OutboxAttempt,
  type ReliableMailOptions,
  type SmtpTransportOptions,
} from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import type { SmtpScript } from './support/smtp-test-server.js';

const SEND_TIMEOUT_MS = 1_500;
const STATEMENT_TIMEOUT_MS = 1_000;
/**
 * The least the options allow: the send, a statement's bound (1 s + the client's 5 s), the settle's 1 s. A send that
 * outlived it would be claimed again.
 */
const LEASE_MS = 8_500;

/** Answers every command just inside the socket timeout: each read is in time, the conversation is not. */
const tarpit = (): SmtpScript => {
  const slow = () => ({ acceptAfterMs: 1_400 });
  return { onConnect: slow, onMailFrom: slow, onRcptTo: slow, onData: slow };
};

/** Whether any two attempts of the row were under way at the same time. */
function overlapping(attempts: OutboxAttempt[]): boolean {
  const sorted = [...attempts].sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime());
  return sorted.some((attempt, index) => {
    const next = sorted[index + 1];
    return next !== undefined && (attempt.finishedAt === null || attempt.finishedAt > next.startedAt);
  });
}

/**
 * The dispatcher bounds a send by `sendTimeoutMs` whatever the app's code or the server do, so a send never outlives
 * the lease and no second worker sends the row while the first still does.
 */
describe('the send deadline', () => {
  const bed = useTestBed();

  it.each<{ name: string; script: SmtpScript; options: Partial<ReliableMailOptions>; mail: object }>([
    {
      name: 'a template render that never resolves',
      script: {},
      options: { templates: [{ name: 'hang', version: 1, render: () => new Promise(() => undefined) }] },
      mail: { to: 'ann@example.com', template: 'hang', params: {} },
    },
    {
      name: 'an attachment resolver that never resolves',
      script: {},
      options: { attachmentResolver: () => new Promise(() => undefined) },
      mail: {
        to: 'ann@example.com',
        subject: 'Report',
        text: 'Attached',
        attachments: [{ filename: 'r.pdf', contentType: 'application/pdf', ref: 'slow.pdf' }],
      },
    },
    {
      name: 'an SMTP server that answers each command just inside the socket timeout',
      script: tarpit(),
      options: {},
      mail: { to: 'ann@example.com', subject: 'Hi', text: 'Hello' },
    },
  ])(
    '$name: each attempt ends within the deadline, and no two workers send the row at once',
    async ({ script, options, mail }) => {
      const server = await bed.startSmtp(script);
      const appOptions = testMailOptions(server.url, {
        ...options,
        transport: { host: '127.0.0.1', port: Number(new URL(server.url).port), ignoreTLS: true, socketTimeout: 2_000 },
        dispatcher: { leaseMs: LEASE_MS, sendTimeoutMs: SEND_TIMEOUT_MS },
        database: { statementTimeoutMs: STATEMENT_TIMEOUT_MS },
      });
      // Two workers on one outbox: the second claims whatever the first's lease no longer holds.
      const first = await bed.startApp(appOptions);
      await bed.startApp(appOptions);
      const { id } = await first.get(MailOutboxService).enqueue(mail as never);

      const outbox = first.get(MailOutboxService);
      await waitFor(
        'three finished attempts',
        async () => {
          const row = await outbox.get(id);
          return row.attemptLog.filter((attempt) => attempt.finishedAt !== null).length >= 3;
        },
        30_000,
      );

      const { attemptLog } = await outbox.get(id);
      expect(overlapping(attemptLog)).toBe(false);
      for (const attempt of attemptLog.filter((entry) => entry.finishedAt !== null)) {
        // Cut while its session was still being opened, a slow server counts as an outage of the lane.
        expect(['transient', 'outage']).toContain(attempt.outcome);
        expect(attempt.durationMs).toBeLessThan(SEND_TIMEOUT_MS + 500);
        expect(attempt.reply).toMatch(/deadline/);
      }
      expect(server.received).toHaveLength(0);
    },
  );
});

describe('a row claimed ahead', () => {
  const bed = useTestBed();

  it('that waited most of a send for its slot has its lease renewed, and gets its whole deadline', async () => {
    // The second row claimed with the first waits for it: each send takes 10.2 s of the 12 s deadline. Renewed, its
    // lease (24 s, twice the send timeout) leaves it the whole deadline; without the renewal its send would have to
    // leave its settle a statement's bound and margin (1 + 5 + 1 s) of the 13.8 s left, and be cut at 6.8 s. Both
    // sides are 1.7 s or more from the send's length, which a busy machine's delays do not bridge (with 6.7 s sends
    // of a 7 s deadline, 0.3 s did, once in a full run).
    const server = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 10_200 }) });
    const options = testMailOptions(server.url, {
      lanes: { default: { concurrency: 1 } },
      dispatcher: { leaseMs: 24_000, sendTimeoutMs: 12_000 },
      database: { statementTimeoutMs: 1_000 },
    });
    // The tests' 2 s socket timeout would cut the held conversation first.
    const app = await bed.startApp({
      ...options,
      transport: { ...(options.transport as SmtpTransportOptions), socketTimeout: 15_000 },
    });
    const outbox = app.get(MailOutboxService);
    const rows = await outbox.enqueueMany([
      { mail: { to: 'ann@example.com', subject: 'One', text: 'x' } },
      { mail: { to: 'bob@example.com', subject: 'Two', text: 'x' } },
    ]);
    await waitFor('both sent', () => app.events.sent.length === 2, 40_000);
    for (const { id } of rows)
      expect((await outbox.get(id)).attemptLog.map((attempt) => attempt.outcome)).toEqual(['sent']);
  });
});
