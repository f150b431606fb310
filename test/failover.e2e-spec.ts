import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { FailoverTransport, SesMailTransport } from '@reliable-mail/nestjs';
import { PostmarkTestApi } from './support/postmark-test-api.js';
import { postmarkTransport, sesTransport } from './support/provider-stand-ins.js';
import { SES_ERRORS, SesTestFront } from './support/ses-test-front.js';
import { useSnsTestServer } from './support/sns-test-server.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { startWebhookApp } from './support/webhook-app.js';

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-feedback';
const credentials = { username: 'postmark', password: 's3cret-webhook-password' };
const postmarkHeaders = {
  'content-type': 'application/json',
  authorization: `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
};
const snsHeaders = { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' };

/** A loopback port nothing listens on: a connection to it is refused at once. */
async function refusingPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const sesAt = (endpoint: string) =>
  new SesMailTransport({
    region: 'eu-west-1',
    endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    configurationSetName: 'transactional',
  });

describe('a lane with SES, then Postmark (FailoverTransport)', () => {
  const bed = useTestBed();
  const sns = useSnsTestServer();
  const standIns: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(standIns.splice(0).map((standIn) => standIn.close()));
  });

  async function start(ses: SesMailTransport, postmark: PostmarkTestApi, probeAfterMs = 60_000) {
    const transport = new FailoverTransport(
      [
        { name: 'ses', transport: ses },
        { name: 'postmark', transport: postmarkTransport(postmark) },
      ],
      { probeAfterMs },
    );
    return startWebhookApp(
      bed,
      { postmark: { basicAuth: credentials }, ses: { topicArns: [TOPIC], agent: sns().agent } },
      { overrides: { transport, retry: { baseDelayMs: 100, maxDelayMs: 200 } } },
    );
  }

  async function attemptsOf(id: string) {
    return (await bed.execute(
      `select attempt, outcome, transport from mail_outbox_attempt where outbox_id = $1 order by attempt`,
      [id],
    )) as Array<{ attempt: number; outcome: string; transport: string }>;
  }

  it('SES refusing connections: the mail goes through Postmark in the same attempt, which says so; its bounce links the row', async () => {
    const postmark = await new PostmarkTestApi().start();
    standIns.push(postmark);
    const { app, outbox, post } = await start(sesAt(`http://127.0.0.1:${await refusingPort()}`), postmark);

    const mail = await outbox.enqueue({ to: 'gone@example.org', subject: 'Your order', text: 'Thanks' });
    await waitFor('the sent event', () => app.events.sent.length === 1);
    expect(postmark.messages.map((message) => message.messageId)).toEqual([mail.messageId]);
    expect(await attemptsOf(mail.id)).toEqual([{ attempt: 1, outcome: 'sent', transport: 'postmark' }]);
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1, providerMessageId: postmark.messages[0].id });

    const bounce = JSON.stringify({
      RecordType: 'Bounce',
      MessageStream: 'outbound',
      ID: 4323372036,
      Type: 'HardBounce',
      TypeCode: 1,
      MessageID: postmark.messages[0].id,
      Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
      Email: 'gone@example.org',
      BouncedAt: '2026-12-03T10:00:00Z',
    });
    const answer = await post('postmark', bounce, postmarkHeaders);
    expect(await answer.json()).toMatchObject({ stored: 1, unlinked: 0 });
    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({ kind: 'bounced', recipient: 'gone@example.org' }),
    ]);
  });

  it('SES dropping the connection after the request was sent: no failover; retried on SES with the same Message-ID; its feedback links the row', async () => {
    const front = new SesTestFront();
    standIns.push(front);
    await front.start();
    const postmark = await new PostmarkTestApi().start();
    standIns.push(postmark);
    // The emulator takes the first request; the answer never comes back.
    front.script.next('drop');
    const { app, outbox, post } = await start(sesTransport(front), postmark);

    const mail = await outbox.enqueue({ to: 'gone@example.org', subject: 'Your order', text: 'Thanks' });
    await waitFor('the sent event', () => app.events.sent.length === 1, 20_000);
    expect(postmark.messages).toEqual([]);
    const stored = await front.stored();
    expect(stored.map((email) => email.messageId)).toEqual([mail.messageId, mail.messageId]);
    expect(await attemptsOf(mail.id)).toEqual([
      { attempt: 1, outcome: 'unknown', transport: 'ses' },
      { attempt: 2, outcome: 'sent', transport: 'ses' },
    ]);

    const delivery = {
      notificationType: 'Delivery',
      mail: {
        timestamp: '2026-12-03T10:00:00.000Z',
        messageId: stored[1].sesId,
        source: 'shop@example.com',
        destination: ['gone@example.org'],
        commonHeaders: { from: ['shop@example.com'], to: ['gone@example.org'], messageId: mail.messageId },
      },
      delivery: {
        timestamp: '2026-12-03T10:00:00.000Z',
        recipients: ['gone@example.org'],
        smtpResponse: '250 2.6.0 Message received',
      },
    };
    const answer = await post('ses', JSON.stringify(sns().notification(TOPIC, delivery)), snsHeaders);
    expect(answer.status).toBe(200);
    await waitFor('the delivery linked', async () => (await outbox.get(mail.id)).feedback.length === 1);
    expect((await outbox.get(mail.id)).feedback).toEqual([expect.objectContaining({ kind: 'delivered' })]);
  });

  // A 500 may come after SES stored the message: read as an unknown outcome, its retry is pinned as a lost answer's.
  it.each([
    ['its answer lost', 'drop' as const],
    ['answered 500 (InternalFailure)', { afterStoring: SES_ERRORS.serverError }],
  ])(
    'the retry of a mail SES may have taken (%s) stays on SES, even when SES then refuses every message',
    async (_case, first) => {
      const front = new SesTestFront();
      standIns.push(front);
      await front.start();
      const postmark = await new PostmarkTestApi().start();
      standIns.push(postmark);
      // The first request taken or failed as above; the retry refused as an account's (an outage); then taken.
      front.script.next(first, SES_ERRORS.accountPaused);
      const { app, outbox } = await start(sesTransport(front), postmark);

      const mail = await outbox.enqueue({ to: 'ann@example.org', subject: 'Your order', text: 'Thanks' });
      await waitFor('the sent event', () => app.events.sent.length === 1, 20_000);
      expect(postmark.messages).toEqual([]);
      expect((await attemptsOf(mail.id)).map(({ outcome, transport }) => `${outcome} ${transport}`)).toEqual([
        'unknown ses',
        'outage ses',
        'sent ses',
      ]);
    },
  );

  it('back on SES once a probe goes through', async () => {
    const front = new SesTestFront();
    standIns.push(front);
    await front.start();
    const postmark = await new PostmarkTestApi().start();
    standIns.push(postmark);
    // SES answers its first request with its account's sending paused (an outage), then takes mail again.
    front.script.next(SES_ERRORS.accountPaused);
    const { app, outbox } = await start(sesTransport(front), postmark, 500);

    const first = await outbox.enqueue({ to: 'ann@example.org', subject: 'One', text: 'x' });
    await waitFor('the first sent', () => app.events.sent.length === 1);
    expect(await attemptsOf(first.id)).toEqual([{ attempt: 1, outcome: 'sent', transport: 'postmark' }]);

    await new Promise((resolve) => setTimeout(resolve, 600));
    const second = await outbox.enqueue({ to: 'bob@example.org', subject: 'Two', text: 'x' });
    await waitFor('the second sent', () => app.events.sent.length === 2);
    expect(await attemptsOf(second.id)).toEqual([{ attempt: 1, outcome: 'sent', transport: 'ses' }]);
    expect((await front.stored()).map((email) => email.messageId)).toEqual([second.messageId]);
    expect(postmark.messages.map((message) => message.messageId)).toEqual([first.messageId]);
  });
});
