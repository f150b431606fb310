import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { ReliableMailModule, ReliableMailWebhooksModule } from '@reliable-mail/nestjs';
import { type ProviderName, startStandIn } from './support/provider-stand-ins.js';
import { signedResendEvent, svixHeaders, RESEND_SECRET } from './support/resend-events.js';
import { SnsTestServer } from './support/sns-test-server.js';
import { ormConfig, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

const resend = { resend: { secret: RESEND_SECRET } };
// In the region of the stand-in's certificate host (sns.us-east-1): SNS signs a topic's messages with its own region's.
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-feedback';
const POSTMARK_SECRET = { name: 'X-Webhook-Secret', value: 'postmark-secret' };

/** A hard bounce of `address` as each provider posts it, naming the message by the id the provider gave it. */
function hardBounce(provider: ProviderName, providerMessageId: string, address: string, sns: SnsTestServer) {
  const at = new Date().toISOString();
  if (provider === 'resend') {
    return signedResendEvent('email.bounced', providerMessageId, [address], {
      bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 no such user' },
    });
  }
  if (provider === 'postmark') {
    const body = JSON.stringify({
      RecordType: 'Bounce',
      ID: 42,
      Type: 'HardBounce',
      MessageID: providerMessageId,
      Email: address,
      BouncedAt: at,
    });
    return { body, headers: { 'content-type': 'application/json', [POSTMARK_SECRET.name]: POSTMARK_SECRET.value } };
  }
  const notification = {
    notificationType: 'Bounce',
    mail: { messageId: providerMessageId, timestamp: at },
    bounce: {
      bounceType: 'Permanent',
      bounceSubType: 'General',
      timestamp: at,
      bouncedRecipients: [{ emailAddress: address }],
    },
  };
  return {
    body: JSON.stringify(sns.notification(TOPIC, notification)),
    headers: { 'content-type': 'text/plain; charset=UTF-8' },
  };
}

describe.each<ProviderName>(['ses', 'postmark', 'resend'])(
  'feedback for mail sent through the %s transport',
  (name) => {
    const bed = useTestBed();

    it('links the webhook by the message id the transport stored: suppressed, EmailBouncedEvent', async () => {
      const provider = await startStandIn(name);
      const sns = await SnsTestServer.start();
      try {
        const { app, post, outbox, admin } = await startWebhookApp(
          bed,
          { ses: { topicArns: [TOPIC], agent: sns.agent }, postmark: { header: POSTMARK_SECRET }, ...resend },
          { overrides: { transport: provider.transport() } },
        );
        const mail = await outbox.enqueue({ to: 'gone@example.org', subject: 'Your order', text: 'Thanks' });
        await waitFor('sent', () => app.events.sent.length === 1);
        const { providerMessageId } = await outbox.get(mail.id);

        const bounce = hardBounce(name, providerMessageId!, 'gone@example.org', sns);
        expect(await (await post(name, bounce.body, bounce.headers)).json()).toMatchObject({ stored: 1, unlinked: 0 });
        expect((await outbox.get(mail.id)).feedback).toEqual([
          expect.objectContaining({ source: name, kind: 'bounced', bounceType: 'hard', providerMessageId }),
        ]);
        expect(await admin.listSuppressions()).toEqual([
          expect.objectContaining({ address: 'gone@example.org', outboxId: mail.id }),
        ]);
        await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
      } finally {
        await sns.close();
        await provider.close();
      }
    });
  },
);

describe('the webhook routes', () => {
  const bed = useTestBed();

  it('1,000 posts in parallel (500 events, each delivered twice): every event stored once, none lost', async () => {
    let sent = 0;
    const { app, post, sendMail } = await startWebhookApp(bed, resend, {
      script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as resend-${++sent}` }) },
    });
    const mails: Array<{ id: string }> = [];
    for (let index = 0; index < 10; index++) mails.push(await sendMail(`customer-${index}@example.org`));
    const events = Array.from({ length: 500 }, (_, index) =>
      signedResendEvent('email.delivered', `resend-${(index % 10) + 1}`, [`customer-${index % 10}@example.org`]),
    );
    const posts = [...events, ...events].sort(() => Math.random() - 0.5);

    const responses = await Promise.all(posts.map((event) => post('resend', event.body, event.headers)));
    expect(responses.map((response) => response.status)).toEqual(posts.map(() => 200));
    const results = (await Promise.all(responses.map((response) => response.json()))) as Array<{ stored: number }>;
    expect(results.reduce((sum, result) => sum + result.stored, 0)).toBe(500);

    const rows = await feedbackRows(bed);
    expect(rows).toHaveLength(500);
    expect(new Set(rows.map((row) => row.provider_event_id)).size).toBe(500);
    expect(rows.every((row) => mails.some((mail) => mail.id === row.outbox_id))).toBe(true);
    await waitFor('500 EmailDeliveredEvents', () => app.events.delivered.length === 500, 30_000);
    expect(new Set(app.events.delivered.map((event) => event.eventId)).size).toBe(500);
    await waitFor(
      'every event confirmed',
      async () => (await bed.execute('select 1 from mail_outbox_event')).length === 0,
    );
  });

  it('a source that is not configured, or unknown: 404', async () => {
    const { post } = await startWebhookApp(bed, resend);
    const event = signedResendEvent('email.delivered', 'x', ['ann@example.org']);
    expect((await post('ses', event.body, event.headers)).status).toBe(404);
    expect((await post('mailgun', event.body, event.headers)).status).toBe(404);
    expect((await post('resend', event.body, event.headers)).status).toBe(200);
  });

  it.each([
    ['a JSON body (kept by the body parser)', 'application/json'],
    ['a text body (read by the route)', 'text/plain'],
  ])('%s over maxBodyBytes: 413, nothing written', async (_case, contentType) => {
    const { post } = await startWebhookApp(bed, resend, { maxBodyBytes: 2_000 });
    const body = JSON.stringify({ type: 'email.delivered', padding: 'x'.repeat(2_000) });
    const response = await post('resend', body, { ...svixHeaders(body), 'content-type': contentType });
    expect(response.status).toBe(413);
    expect(await feedbackRows(bed)).toEqual([]);
  });

  it('an app created without { rawBody: true }: a JSON webhook fails with 500 saying so, nothing written', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        MikroOrmModule.forRoot(ormConfig(bed.databaseUrl)),
        EventEmitterModule.forRoot(),
        ScheduleModule.forRoot(),
        ReliableMailModule.forRoot({
          ...testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }),
          isGlobal: true,
        }),
        ReliableMailWebhooksModule.forRoot({ sources: resend }),
      ],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const port = (app.getHttpServer().address() as AddressInfo).port;
      const event = signedResendEvent('email.delivered', randomUUID(), ['ann@example.org']);
      const response = await fetch(`http://127.0.0.1:${port}/webhooks/mail/resend`, {
        method: 'POST',
        headers: event.headers,
        body: event.body,
      });
      expect(response.status).toBe(500);
      expect(((await response.json()) as { message: string }).message).toMatch(/\{ rawBody: true \}/);
      expect(await feedbackRows(bed)).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
