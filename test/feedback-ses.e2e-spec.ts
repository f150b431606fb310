import { describe, expect, it } from '@jest/globals';
import { EmailComplainedEvent, EmailDeliveredEvent } from '@reliable-mail/nestjs';
import { FAILURE_MEMORY_MS } from '../libs/reliable-mail/src/feedback/sources/sns-certificates.js';
import { CERT_URL, certificateUrl, useSnsTestServer } from './support/sns-test-server.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-feedback';
const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

/** An SES notification about one of the app's mails, as SES publishes it to SNS. */
function sesNotification(type: 'Bounce' | 'Complaint' | 'Delivery', mail: { messageId: string }, sesMessageId: string) {
  const timestamp = '2026-12-03T10:00:00.000Z';
  const common = {
    mail: {
      timestamp,
      messageId: sesMessageId,
      source: 'shop@example.com',
      destination: ['gone@example.org'],
      commonHeaders: { from: ['shop@example.com'], to: ['gone@example.org'], messageId: mail.messageId },
    },
  };
  switch (type) {
    case 'Bounce':
      return {
        notificationType: 'Bounce',
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          bouncedRecipients: [
            {
              emailAddress: 'gone@example.org',
              action: 'failed',
              status: '5.1.1',
              diagnosticCode: 'smtp; 550 5.1.1 user unknown',
            },
          ],
          timestamp,
          feedbackId: '0100018d-feedback',
        },
        ...common,
      };
    case 'Complaint':
      return {
        eventType: 'Complaint',
        complaint: {
          complainedRecipients: [{ emailAddress: 'gone@example.org' }],
          complaintFeedbackType: 'abuse',
          timestamp,
          feedbackId: '0100018d-complaint',
        },
        ...common,
      };
    case 'Delivery':
      return {
        notificationType: 'Delivery',
        delivery: { timestamp, recipients: ['gone@example.org'], smtpResponse: '250 2.6.0 Message received' },
        ...common,
      };
  }
}

describe('Amazon SES feedback through SNS', () => {
  const bed = useTestBed();
  const sns = useSnsTestServer();

  const start = (script = {}) => startWebhookApp(bed, { ses: { topicArns: [TOPIC], agent: sns().agent } }, { script });
  const snsHeaders = { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' };

  it('a bounce linked by the Message-ID: stored, suppressed, EmailBouncedEvent once; the same message twice stores one row', async () => {
    const { app, post, sendMail, outbox, admin } = await start();
    const mail = await sendMail('gone@example.org');
    const body = JSON.stringify(sns().notification(TOPIC, sesNotification('Bounce', mail, 'ses-0001')));

    const first = await post('ses', body, snsHeaders);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ stored: 1, duplicates: 0, unlinked: 0, ignored: null });
    expect(await (await post('ses', body, snsHeaders)).json()).toMatchObject({ stored: 0, duplicates: 1 });

    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({
        source: 'ses',
        kind: 'bounced',
        bounceType: 'hard',
        status: '5.1.1',
        diagnostic: 'smtp; 550 5.1.1 user unknown',
        providerMessageId: 'ses-0001',
        providerEventId: JSON.parse(body).MessageId,
      }),
    ]);
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({ address: 'gone@example.org', source: 'bounce', outboxId: mail.id }),
    ]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    await settle();
    expect(app.events.bounced).toEqual([
      expect.objectContaining({ id: mail.id, bounceType: 'hard', suppressed: true, authenticated: true }),
    ]);
    // The certificate was fetched once, then taken from the cache.
    expect(sns().requests.filter((path) => path.endsWith('.pem'))).toHaveLength(1);
  });

  it('a complaint (signature version 2) linked by SES’s message id: suppressed as a complaint, EmailComplainedEvent', async () => {
    const { app, post, sendMail, admin } = await start({ onData: () => ({ code: 250, text: 'Ok 0100018d-ses-0002' }) });
    const mail = await sendMail('gone@example.org');
    const notification = sesNotification('Complaint', { messageId: '<foreign@example.com>' }, '0100018d-ses-0002');
    const signed = sns().sign({ ...sns().notification(TOPIC, notification), SignatureVersion: '2' }, '2');

    expect((await post('ses', JSON.stringify(signed), snsHeaders)).status).toBe(200);
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({ address: 'gone@example.org', source: 'complaint', reason: 'ses complaint: abuse' }),
    ]);
    await waitFor('EmailComplainedEvent', () => app.events.complained.length === 1);
    expect(app.events.complained[0]).toBeInstanceOf(EmailComplainedEvent);
    expect(app.events.complained[0]).toMatchObject({ id: mail.id, diagnostic: 'abuse', suppressed: true });
  });

  it('a delivery: EmailDeliveredEvent, no suppression', async () => {
    const { app, post, sendMail, admin } = await start();
    const mail = await sendMail('gone@example.org');
    const body = JSON.stringify(sns().notification(TOPIC, sesNotification('Delivery', mail, 'ses-0003')));
    expect((await post('ses', body, snsHeaders)).status).toBe(200);
    await waitFor('EmailDeliveredEvent', () => app.events.delivered.length === 1);
    expect(app.events.delivered[0]).toBeInstanceOf(EmailDeliveredEvent);
    expect(app.events.delivered[0]).toMatchObject({
      id: mail.id,
      status: '2.6.0',
      diagnostic: '250 2.6.0 Message received',
    });
    expect(await admin.listSuppressions()).toEqual([]);
  });

  it('the certificate host answers 503 once: that notification gets a 503 and nothing is kept; within 15 s the URL is answered 503 unfetched, then its retry and another signed with the certificate are stored', async () => {
    const { post, sendMail, outbox } = await start();
    const mail = await sendMail('gone@example.org');
    const before = sns().requests.length;
    sns().certificateHost.replies.push({ status: 503, body: '<html>Service Unavailable</html>' });
    const first = JSON.stringify(sns().notification(TOPIC, sesNotification('Delivery', mail, 'ses-0010')));
    const second = JSON.stringify(sns().notification(TOPIC, sesNotification('Bounce', mail, 'ses-0011')));
    const pemFetches = () =>
      sns()
        .requests.slice(before)
        .filter((path) => path.endsWith('.pem')).length;

    // A 5xx, which SNS retries; a 401 it would not, and the report would be lost.
    expect((await post('ses', first, snsHeaders)).status).toBe(503);
    expect(await feedbackRows(bed)).toEqual([]);
    // Anyone can post a message naming the URL: the failure is remembered, and the host not asked again at once.
    expect((await post('ses', first, snsHeaders)).status).toBe(503);
    expect(pemFetches()).toBe(1);

    // SNS retries 20 s later by default.
    await new Promise((resolve) => setTimeout(resolve, FAILURE_MEMORY_MS));
    expect(await (await post('ses', first, snsHeaders)).json()).toMatchObject({ stored: 1 });
    expect(await (await post('ses', second, snsHeaders)).json()).toMatchObject({ stored: 1 });
    expect((await outbox.get(mail.id)).feedback.map((entry) => entry.kind)).toEqual(['delivered', 'bounced']);
    // The failed fetch, the good one, and no more: the certificate is cached once it checked out.
    expect(pemFetches()).toBe(2);
  });

  it('a 200 that is not a certificate, a 200 that looks like a PEM but does not parse, a 404 from the certificate host: each a 503, kept for nothing; after 15 s the next request fetches again and is stored', async () => {
    const { post, sendMail } = await start();
    const mail = await sendMail('gone@example.org');
    const replies = [
      { status: 200, body: '<html>Please sign in</html>' },
      { status: 200, body: '-----BEGIN CERTIFICATE-----\nAAAA\n' },
      { status: 404, body: 'Not Found' },
    ];
    // Each signed with a certificate URL of its own, so that each is fetched apart.
    const bodies = replies.map((_, index) =>
      JSON.stringify(
        sns().notification(TOPIC, sesNotification('Delivery', mail, `ses-001${index}`), {
          SigningCertURL: certificateUrl(`bad${index}`),
        }),
      ),
    );
    for (const [index, reply] of replies.entries()) {
      sns().certificateHost.replies.push(reply);
      expect((await post('ses', bodies[index], snsHeaders)).status).toBe(503);
    }
    await new Promise((resolve) => setTimeout(resolve, FAILURE_MEMORY_MS));
    for (const body of bodies) expect(await (await post('ses', body, snsHeaders)).json()).toMatchObject({ stored: 1 });
  });

  it('notifications that need the certificate at the same time share one fetch', async () => {
    const { post, sendMail } = await start();
    const mail = await sendMail('gone@example.org');
    sns().certificateHost.delayMs = 300;
    const before = sns().requests.length;
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, index) =>
        post(
          'ses',
          JSON.stringify(sns().notification(TOPIC, sesNotification('Delivery', mail, `ses-002${index}`))),
          snsHeaders,
        ),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(5).fill(200));
    expect(
      sns()
        .requests.slice(before)
        .filter((path) => path.endsWith('.pem')),
    ).toHaveLength(1);
  });

  it('a notification nested 30,000 levels deep: 400 with the reason, nothing written', async () => {
    const { post, sendMail } = await start();
    const mail = await sendMail('gone@example.org');
    const notification = JSON.stringify(sesNotification('Bounce', mail, 'ses-0030')).replace(
      '"mail":{',
      `"deep":${'['.repeat(30_000)}${']'.repeat(30_000)},"mail":{`,
    );
    const response = await post('ses', JSON.stringify(sns().notification(TOPIC, notification)), snsHeaders);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toBe(
      'Malformed feedback: the body nests deeper than 64 levels',
    );
    expect(await feedbackRows(bed)).toEqual([]);
  });

  it('a bounce dated in the year 200000: 400 with the reason, nothing written', async () => {
    const { post, sendMail } = await start();
    const mail = await sendMail('gone@example.org');
    const notification = JSON.stringify(sesNotification('Bounce', mail, 'ses-0031')).replaceAll(
      '2026-12-03T10:00:00.000Z',
      '+200000-01-01T00:00:00.000Z',
    );
    const response = await post('ses', JSON.stringify(sns().notification(TOPIC, notification)), snsHeaders);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toBe(
      'Malformed feedback: bounce.timestamp must be a date within the years 1 to 9999',
    );
    expect(await feedbackRows(bed)).toEqual([]);
  });

  it('confirms a subscription to an allowed topic by visiting its SubscribeURL', async () => {
    const { post } = await start();
    const confirmation = sns().subscriptionConfirmation(TOPIC);
    const response = await post('ses', JSON.stringify(confirmation), {
      ...snsHeaders,
      'x-amz-sns-message-type': 'SubscriptionConfirmation',
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ stored: 0, ignored: `subscribed to ${TOPIC}` });
    expect(sns().requests).toContain(
      new URL(confirmation.SubscribeURL).pathname + new URL(confirmation.SubscribeURL).search,
    );
  });

  it('refuses a SubscribeURL off the SNS hosts without visiting it (400)', async () => {
    const { post } = await start();
    const before = sns().requests.length;
    const response = await post(
      'ses',
      JSON.stringify(sns().subscriptionConfirmation(TOPIC, 'evil.example.com')),
      snsHeaders,
    );
    expect(response.status).toBe(400);
    expect(
      sns()
        .requests.slice(before)
        .some((path) => path.includes('ConfirmSubscription')),
    ).toBe(false);
  });

  it.each([
    {
      name: 'a tampered message',
      spoil: (body: Record<string, string>) => ({ ...body, Message: body.Message.replace('gone@', 'ceo@') }),
      fetches: 1,
    },
    {
      name: 'a certificate from a host outside the pinned AWS pattern',
      spoil: (body: Record<string, string>) =>
        sns().sign({ ...body, SigningCertURL: CERT_URL.replace('amazonaws.com', 'amazonaws.com.evil.example') }),
      fetches: 0,
    },
    {
      name: 'a certificate of another region than the topic’s (us-east-1)',
      spoil: (body: Record<string, string>) =>
        sns().sign({ ...body, SigningCertURL: CERT_URL.replace('us-east-1', 'eu-west-1') }),
      fetches: 0,
    },
    {
      name: 'a topic not among topicArns',
      spoil: (body: Record<string, string>) =>
        sns().sign({ ...body, TopicArn: 'arn:aws:sns:us-east-1:999999999999:other' }),
      fetches: 0,
    },
    {
      name: 'no signature (raw message delivery)',
      spoil: (body: Record<string, string>) => ({ ...body, Signature: '', SignatureVersion: '' }),
      fetches: 0,
    },
  ])('$name: 401 and nothing written', async ({ spoil, fetches }) => {
    const { post, sendMail, admin } = await start();
    const mail = await sendMail('gone@example.org');
    const before = sns().requests.length;
    const body = spoil(sns().notification(TOPIC, sesNotification('Bounce', mail, 'ses-0004')));
    expect((await post('ses', JSON.stringify(body), snsHeaders)).status).toBe(401);
    expect(await feedbackRows(bed)).toEqual([]);
    expect(await admin.listSuppressions()).toEqual([]);
    expect(sns().requests.length - before).toBe(fetches);
  });

  it.each([
    ['a body that is not JSON', () => 'Type=Notification'],
    ['a Message that is not JSON', () => JSON.stringify(sns().notification(TOPIC, 'not json'))],
    [
      'a bounce without recipients',
      () =>
        JSON.stringify(
          sns().notification(TOPIC, {
            notificationType: 'Bounce',
            mail: { messageId: 'x' },
            bounce: { bounceType: 'Permanent', timestamp: '2026-12-03T10:00:00Z' },
          }),
        ),
    ],
  ])('%s: 400 with the reason, nothing written', async (_case, body) => {
    const { post } = await start();
    const response = await post('ses', body(), snsHeaders);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toMatch(/^Malformed feedback: /);
    expect(await feedbackRows(bed)).toEqual([]);
  });
});
