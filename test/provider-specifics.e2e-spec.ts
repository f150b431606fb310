import { afterEach, describe, expect, it } from '@jest/globals';
import {
  MailOutboxAdmin,
  MailOutboxService,
  type MailTemplate,
  type MailTransport,
  MissingPeerDependencyError,
  ResendMailTransport,
  type ReliableMailOptions,
  type TransportContext,
} from '@reliable-mail/nestjs';
import { POSTMARK_ERRORS, PostmarkTestApi } from './support/postmark-test-api.js';
import { RESEND_ERRORS, ResendTestApi } from './support/resend-test-api.js';
import { postmarkTransport, sesTransport } from './support/provider-stand-ins.js';
import { SesTestFront } from './support/ses-test-front.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

/** A failed event that closed its row (not one of a retry). */
const isFinal = (event: { status: string }) => event.status !== 'pending';

describe('what each provider transport does of its own', () => {
  const bed = useTestBed();
  const standIns: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(standIns.splice(0).map((standIn) => standIn.close()));
  });

  async function started<T extends { start(): Promise<T>; close(): Promise<void> }>(standIn: T): Promise<T> {
    standIns.push(standIn);
    return standIn.start();
  }
  const startApp = (overrides: Partial<ReliableMailOptions>) => bed.startApp(testMailOptions(bed.smtpUrl, overrides));

  it('SES: each mail is in the emulator with its stored Message-ID, its envelope as Destination, and the configuration set', async () => {
    const front = await started(new SesTestFront());
    const app = await startApp({ transport: sesTransport(front) });
    const rows = await app.get(MailOutboxService).enqueueMany([
      { mail: { to: 'ann@example.com', subject: 'First', text: 'one' } },
      {
        mail: {
          to: 'bob@example.com',
          cc: 'carl@example.com',
          bcc: 'dora@example.com',
          subject: 'Second',
          text: 'two',
        },
      },
      { mail: { to: 'erin@example.com', subject: 'Third', html: '<p>three</p>' } },
    ]);
    await waitFor('three sent events', () => app.events.sent.length === 3);

    const stored = await front.stored();
    const bySubject = (subject: string) => stored.find((email) => email.subject === subject);
    expect(['First', 'Second', 'Third'].map((subject) => bySubject(subject)?.messageId)).toEqual(
      rows.map((row) => row.messageId),
    );
    expect(bySubject('Second')).toMatchObject({
      destination: {
        ToAddresses: ['bob@example.com'],
        CcAddresses: ['carl@example.com'],
        BccAddresses: ['dora@example.com'],
      },
      configurationSetName: 'transactional',
    });
    // The provider's message id of each row is the id the emulator stored it under.
    const sent = new Map(app.events.sent.map((event) => [event.messageId, event.providerMessageId]));
    expect(rows.map((row) => sent.get(row.messageId))).toEqual(
      ['First', 'Second', 'Third'].map((subject) => bySubject(subject)?.sesId),
    );
  });

  it('SES: a lane rate of 2 per second holds for a provider too', async () => {
    const front = await started(new SesTestFront());
    const app = await startApp({ transport: sesTransport(front), lanes: { default: { ratePerSecond: 2 } } });
    const rows = await app.get(MailOutboxService).enqueueMany(
      Array.from({ length: 6 }, (_, index) => ({
        mail: { to: `user${index}@example.com`, subject: 'Hi', text: 'x' },
      })),
    );
    await waitFor('six sent events', () => app.events.sent.length === 6);
    const sends = front.requests.filter((request) => request.method === 'POST').length;
    expect(sends).toBe(rows.length);
    // A bucket of one second's worth sends 2 at once, then one every 500 ms: the last 2 s after the first. The
    // margin is for the first answer, which also waits for the connection; without the limit all six go at once.
    const acceptedAt = app.events.sent.map((event) => event.providerAcceptedAt!.getTime()).sort((a, b) => a - b);
    expect(acceptedAt.at(-1)! - acceptedAt[0]).toBeGreaterThanOrEqual(1_500);
  });

  it('Postmark: each lane sends through its message stream', async () => {
    const api = await started(new PostmarkTestApi());
    const app = await startApp({
      transport: postmarkTransport(api, { messageStreamsByLane: { bulk: 'broadcast' } }),
      lanes: { default: {}, bulk: {} },
    });
    const outbox = app.get(MailOutboxService);
    await outbox.enqueue({ to: 'ann@example.com', subject: 'Receipt', text: 'x' });
    await outbox.enqueue({ to: 'bob@example.com', subject: 'News', text: 'x' }, { lane: 'bulk' });
    await waitFor('two sent events', () => app.events.sent.length === 2);
    expect(api.messages.map((message) => [message.subject, message.stream]).sort()).toEqual([
      ['News', 'broadcast'],
      ['Receipt', 'outbound'],
    ]);
  });

  it('Postmark: an inactive recipient is refused on its own; the other is retried alone and sent', async () => {
    const api = await started(new PostmarkTestApi());
    api.script.next(POSTMARK_ERRORS.inactiveRecipients(['bob@example.com']));
    const app = await startApp({ transport: postmarkTransport(api) });
    const outbox = app.get(MailOutboxService);
    const { id, messageId } = await outbox.enqueue({
      to: 'ann@example.com',
      cc: 'bob@example.com',
      subject: 'Your order',
      text: 'x',
    });
    await waitFor('the sent event', () => app.events.sent.length === 1);

    expect(app.events.sent[0]).toMatchObject({
      accepted: ['ann@example.com'],
      rejected: [expect.objectContaining({ address: 'bob@example.com', replyCode: 422 })],
    });
    const row = await outbox.get(id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['unknown', 'sent']);
    expect(api.messages).toEqual([expect.objectContaining({ messageId, to: 'ann@example.com', cc: undefined })]);
  });

  it('Postmark: one inactive recipient among three (a 200 naming it): it refused, not suppressed, the other two accepted', async () => {
    const api = await started(new PostmarkTestApi());
    api.inactive.add('carl@example.com');
    const app = await startApp({ transport: postmarkTransport(api) });
    const outbox = app.get(MailOutboxService);
    const { id, messageId } = await outbox.enqueue({
      to: ['ann@example.com', 'bob@example.com'],
      cc: 'Carl@example.com',
      subject: 'Your order',
      text: 'x',
    });
    await waitFor('the sent event', () => app.events.sent.length === 1);

    expect(app.events.sent[0].accepted).toEqual(['ann@example.com', 'bob@example.com']);
    expect(app.events.sent[0].rejected).toEqual([
      {
        address: 'carl@example.com',
        replyCode: 200,
        reply: expect.stringMatching(/will not deliver to these inactive addresses: carl@example\.com/),
      },
    ]);
    const row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1 });
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['sent']);
    expect(row.attemptLog[0].recipients!.map(({ address, status }) => `${address} ${status}`)).toEqual([
      'ann@example.com accepted',
      'bob@example.com accepted',
      'carl@example.com refused',
    ]);
    // Postmark keeps its own list of inactive addresses: the refusal is for this mail, not a suppression.
    expect(await bed.execute('select address from mail_suppression')).toEqual([]);
    expect(api.messages).toEqual([
      expect.objectContaining({ messageId, recipients: ['ann@example.com', 'bob@example.com'] }),
    ]);
  });

  it('Postmark: a mail to more than 50 goes out with its To and Cc together in the first request, each Bcc recipient left over in a request of its own, as its To', async () => {
    const api = await started(new PostmarkTestApi());
    const app = await startApp({ transport: postmarkTransport(api) });
    const bcc = Array.from({ length: 60 }, (_, index) => `reader${index}@example.com`);
    const { id } = await app.get(MailOutboxService).enqueue({
      to: ['Ann <ann@example.com>', 'carl@example.com'],
      cc: 'bob@example.com',
      bcc,
      subject: 'Your order',
      text: 'x',
    });
    await waitFor('the sent event', () => app.events.sent.length === 1);

    const messages = api.messages.map(({ to, cc, bcc, recipients }) => ({ to, cc, bcc, count: recipients.length }));
    expect(messages[0]).toEqual({
      to: '"Ann" <ann@example.com>, carl@example.com',
      cc: 'bob@example.com',
      bcc: bcc.slice(0, 47).join(', '),
      count: 50,
    });
    // Postmark refuses a request without a To, and Postmark makes the headers of the request's own recipients: a
    // Bcc recipient with nobody else's address to see is the To of a request of its own.
    expect(messages.slice(1)).toEqual(
      bcc.slice(47).map((address) => ({ to: address, cc: undefined, bcc: undefined, count: 1 })),
    );
    expect((await app.get(MailOutboxService).get(id)).status).toBe('sent');
  });

  it('Resend: at shutdown a mail in many requests makes no further one; what went out is settled, and the next instance sends the rest', async () => {
    const api = await started(new ResendTestApi());
    // 5 requests a second: the 12 requests of this mail take 2.6 s, longer than the 1 s the shutdown waits.
    const resend = () => ({ transport: new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url }) });
    const app = await startApp({ ...resend(), dispatcher: { shutdownTimeoutMs: 1_000 } });
    const bcc = Array.from({ length: 60 }, (_, index) => `reader${index}@example.com`);
    const { id } = await app
      .get(MailOutboxService)
      .enqueue({ to: 'ann@example.com', bcc, subject: 'Minutes', text: 'x' });
    await waitFor('three requests taken', () => api.messages.length >= 3);
    await app.close();

    const taken = api.messages.flatMap((message) => message.recipients);
    const reader = await startApp({ ...resend(), dispatcher: { enabled: false } });
    const row = await reader.get(MailOutboxService).get(id);
    expect(row).toMatchObject({ status: 'pending', attempts: 0 });
    expect([...(row.acceptedRecipients ?? [])].sort()).toEqual([...taken].sort());
    const stopped = row.attemptLog[0].recipients!.filter((recipient) => recipient.reply?.includes('the app shut down'));
    expect(stopped).toHaveLength(61 - taken.length);

    const next = await startApp(resend());
    await waitFor('the row sent', async () => (await next.get(MailOutboxService).get(id)).status === 'sent');
    const received = api.messages.flatMap((message) => message.recipients);
    expect(received.sort()).toEqual(['ann@example.com', ...bcc].sort());
  });

  it.each([
    { answer: 'its answer lost', reply: 'drop' as const },
    // Resend may store a message and then answer 500: the attempt is unknown, as with a lost answer.
    { answer: 'answered 500', reply: { afterStoring: RESEND_ERRORS.serverError } },
  ])(
    'Resend: the first request stored and $answer, the retry renders another body (409): sent, one message',
    async ({ reply }) => {
      const api = await started(new ResendTestApi());
      api.script.next(reply);
      let renders = 0;
      // Not deterministic, as the README asks templates to be: each render stamps the time it ran.
      const receipt: MailTemplate = {
        name: 'receipt',
        version: 1,
        render: () => ({ subject: 'Your receipt', text: `rendered ${++renders} at ${new Date().toISOString()}` }),
      };
      const app = await startApp({
        transport: new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url }),
        templates: [receipt],
      });
      const outbox = app.get(MailOutboxService);
      const { id, messageId } = await outbox.enqueue({ to: 'ann@example.com', template: 'receipt', params: {} });
      await waitFor('the row final', () => app.events.sent.length + app.events.failed.filter(isFinal).length === 1);

      const row = await outbox.get(id);
      expect(row.status).toBe('sent');
      expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['unknown', 'sent']);
      expect(row.attemptLog[1]).toMatchObject({
        replyCode: 409,
        reply: expect.stringMatching(/^409 invalid_idempotent_request: .* \(taken by an earlier attempt with this key/),
        deduplicatedByKey: true,
      });
      expect(app.events.sent[0]).toMatchObject({ accepted: ['ann@example.com'], reply: row.attemptLog[1].reply });
      // The retry went with the same key and another body, and Resend kept the first.
      const posts = api.requests.filter((request) => request.method === 'POST');
      expect(posts.map((request) => request.headers['idempotency-key'])).toEqual([id, id]);
      expect(new Set(posts.map((request) => JSON.parse(request.body).text)).size).toBe(2);
      expect(api.messages).toEqual([expect.objectContaining({ messageId, idempotencyKey: id })]);
    },
  );

  it('Resend: a 409 invalid_idempotent_request on a first attempt (another sender of the team used the key) still refuses the mail', async () => {
    const api = await started(new ResendTestApi());
    const app = await startApp({ transport: new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url }) });
    // Another app of the same Resend team sends with the key this mail will use.
    const other = await fetch(`${api.url}/emails`, {
      method: 'POST',
      headers: { authorization: 'Bearer re_test', 'content-type': 'application/json', 'idempotency-key': 'order:9' },
      body: JSON.stringify({ from: 'other@example.com', to: ['zed@example.com'], subject: 'Other', text: 'x' }),
    });
    expect(other.status).toBe(200);
    const outbox = app.get(MailOutboxService);
    const { id } = await outbox.enqueue(
      { to: 'ann@example.com', subject: 'Your order', text: 'x' },
      { idempotencyKey: 'order:9' },
    );
    await waitFor('the failed event', () => app.events.failed.length === 1);

    expect(app.events.failed[0]).toMatchObject({ status: 'failed', cause: 'refused', replyCode: 409 });
    expect(await outbox.get(id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(api.messages.map((message) => message.to)).toEqual([['zed@example.com']]);
  });

  it('Resend: a 429 with Retry-After: 3 while 20 mails are queued: no request for 3 s, then every mail once', async () => {
    const api = await started(new ResendTestApi());
    api.script.next(RESEND_ERRORS.rateLimitedFor(3));
    // 5 requests a second: the 8 sends of the lane wait for their slots when the first is answered 429.
    const app = await startApp({ transport: new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url }) });
    const rows = await app.get(MailOutboxService).enqueueMany(
      Array.from({ length: 20 }, (_, index) => ({
        mail: { to: `user${index}@example.com`, subject: 'Hi', text: 'x' },
      })),
    );
    await waitFor('20 sent events', () => app.events.sent.length === 20, 60_000);

    const [throttled, ...after] = api.requests.filter((request) => request.method === 'POST');
    // The hold starts when the answer arrives, after the stand-in logged its request; a timer may fire a millisecond
    // early. Without the hold, the requests already waiting for their slots went within 1 s.
    const gap = after[0].receivedAt - throttled.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(2_990);
    expect(gap).toBeLessThan(10_000);
    expect(after).toHaveLength(20);
    expect(api.messages.map((message) => message.messageId).sort()).toEqual(rows.map((row) => row.messageId).sort());
  });

  it('Resend: a 429 with a Retry-After longer than the send deadline: the sends waiting are held back at once, charged nothing, then every mail once', async () => {
    const api = await started(new ResendTestApi());
    // 8 s, where a send may take 5 (the tests' sendTimeoutMs).
    api.script.next(RESEND_ERRORS.rateLimitedFor(8));
    const app = await startApp({ transport: new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url }) });
    const outbox = app.get(MailOutboxService);
    const rows = await outbox.enqueueMany(
      Array.from({ length: 20 }, (_, index) => ({
        mail: { to: `user${index}@example.com`, subject: 'Hi', text: 'x' },
      })),
    );
    await waitFor('20 sent events', () => app.events.sent.length === 20, 60_000);

    const [throttled, ...after] = api.requests.filter((request) => request.method === 'POST');
    expect(after[0].receivedAt - throttled.receivedAt).toBeGreaterThanOrEqual(7_990);
    expect(after).toHaveLength(20);
    // The one request answered 429 is charged (and reported); the sends that made none are not.
    expect(app.events.failed).toHaveLength(1);
    const attempts = await Promise.all(rows.map(async (row) => (await outbox.get(row.id)).attempts));
    expect(attempts.sort()).toEqual([...Array(19).fill(1), 2]);
  });

  it('Postmark: a 429 with Retry-After: 3 pauses the lane 3 s, not its first second', async () => {
    const api = await started(new PostmarkTestApi());
    api.script.next(POSTMARK_ERRORS.rateLimitedFor(3));
    const app = await startApp({ transport: postmarkTransport(api), lanes: { default: { concurrency: 1 } } });
    await app.get(MailOutboxService).enqueueMany(
      Array.from({ length: 3 }, (_, index) => ({
        mail: { to: `user${index}@example.com`, subject: 'Hi', text: 'x' },
      })),
    );
    await waitFor('3 sent events', () => app.events.sent.length === 3, 30_000);

    const [throttled, next] = api.requests.filter((request) => request.method === 'POST');
    expect(next.receivedAt - throttled.receivedAt).toBeGreaterThanOrEqual(2_990);
    expect(api.messages).toHaveLength(3);
  });

  it('Postmark: a suppressed recipient is left out of the request, not only out of the envelope', async () => {
    const api = await started(new PostmarkTestApi());
    const app = await startApp({ transport: postmarkTransport(api) });
    await app.get(MailOutboxAdmin).suppress('bob@example.com', 'complained');
    const { id } = await app
      .get(MailOutboxService)
      .enqueue({ to: 'Ann <ann@example.com>', cc: 'bob@example.com', subject: 'Your order', text: 'x' });
    await waitFor('the sent event', () => app.events.sent.length === 1);
    expect(api.messages).toEqual([expect.objectContaining({ to: '"Ann" <ann@example.com>', cc: undefined })]);
    expect((await app.get(MailOutboxService).get(id)).status).toBe('sent');
  });

  it("a transport object is opened once with the module's sender, whatever the lanes sharing it; a failed open stops the start", async () => {
    const contexts: TransportContext[] = [];
    const transport = (open: (context: TransportContext) => Promise<void>): MailTransport => ({
      open,
      send: async () => ({ kind: 'outage', replyCode: null, enhancedStatus: null, reply: 'not used' }),
      verify: async () => undefined,
      close: async () => undefined,
    });
    await startApp({
      transport: transport(async (context) => void contexts.push(context)),
      from: 'Shop <Shop@Example.com>',
      dispatcher: { enabled: false },
    });
    expect(contexts).toEqual([{ defaultSender: 'shop@example.com' }]);

    const missing = transport(async () => {
      throw new MissingPeerDependencyError('resend', 'Resend');
    });
    await expect(startApp({ transport: missing, dispatcher: { enabled: false } })).rejects.toThrow(
      'Resend needs the package resend: npm install resend',
    );
  });
});
