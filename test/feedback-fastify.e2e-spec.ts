import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { RESEND_SECRET, signedResendEvent } from './support/resend-events.js';
import { useSnsTestServer } from './support/sns-test-server.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-feedback';
const postmarkAuth = { username: 'postmark', password: 's3cret-webhook-password' };

// The same webhooks behind Nest's Fastify adapter (created with { rawBody: true }): Fastify parses JSON and
// text/plain bodies itself, and the signatures must still be checked against the bytes that were sent.
describe('webhooks on the Fastify adapter', () => {
  const bed = useTestBed();
  const sns = useSnsTestServer();

  async function start(providerMessageId: string) {
    return startWebhookApp(
      bed,
      {
        resend: { secret: RESEND_SECRET },
        ses: { topicArns: [TOPIC], agent: sns().agent },
        postmark: { basicAuth: postmarkAuth },
      },
      {
        script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as ${providerMessageId}` }) },
        http: 'fastify',
        maxBodyBytes: 64 * 1024,
      },
    );
  }

  it('Resend (Svix over JSON), SES (SNS over text/plain) and Postmark (basic auth) reports are verified, stored and linked', async () => {
    const providerMessageId = randomUUID();
    const { app, post, sendMail } = await start(providerMessageId);
    const mail = await sendMail(['gone@example.org', 'moved@example.org', 'spam@example.org']);

    const resend = signedResendEvent('email.bounced', providerMessageId, ['gone@example.org'], {
      bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 The email account does not exist' },
    });
    const ses = JSON.stringify(
      sns().notification(TOPIC, {
        notificationType: 'Complaint',
        complaint: {
          complainedRecipients: [{ emailAddress: 'spam@example.org' }],
          complaintFeedbackType: 'abuse',
          timestamp: '2026-12-03T10:00:00.000Z',
          feedbackId: '0100018d-complaint',
        },
        mail: {
          timestamp: '2026-12-03T10:00:00.000Z',
          messageId: providerMessageId,
          source: 'shop@example.com',
          destination: ['spam@example.org'],
          commonHeaders: { messageId: mail.messageId },
        },
      }),
    );
    const postmark = JSON.stringify({
      RecordType: 'Delivery',
      MessageID: providerMessageId,
      Recipient: 'moved@example.org',
      DeliveredAt: '2026-12-03T10:00:00Z',
      Details: 'smtp;250 2.0.0 OK',
    });
    const answers = await Promise.all([
      post('resend', resend.body, resend.headers),
      post('ses', ses, { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' }),
      post('postmark', postmark, {
        'content-type': 'application/json',
        authorization: `Basic ${Buffer.from(`${postmarkAuth.username}:${postmarkAuth.password}`).toString('base64')}`,
      }),
    ]);
    expect(await Promise.all(answers.map((answer) => answer.json()))).toEqual(
      Array(3).fill({ stored: 1, duplicates: 0, unlinked: 0, ignored: null }),
    );
    const rows = await feedbackRows(bed);
    expect(
      rows
        .map(({ source, kind, outbox_id }) => ({ source, kind, outbox_id }))
        .sort((a, b) => a.source.localeCompare(b.source)),
    ).toEqual([
      { source: 'postmark', kind: 'delivered', outbox_id: mail.id },
      { source: 'resend', kind: 'bounced', outbox_id: mail.id },
      { source: 'ses', kind: 'complained', outbox_id: mail.id },
    ]);
    await waitFor('the events', () => app.events.bounced.length + app.events.complained.length === 2);
  });

  it('a body changed after signing: 401; a body past maxBodyBytes: 413; not JSON: 400; nothing written', async () => {
    const { post } = await start(randomUUID());
    const event = signedResendEvent('email.bounced', randomUUID(), ['gone@example.org'], {});
    const tampered = event.body.replace('gone@example.org', 'else@example.org');
    expect((await post('resend', tampered, event.headers)).status).toBe(401);

    const large = signedResendEvent('email.bounced', randomUUID(), ['gone@example.org'], { pad: 'x'.repeat(70_000) });
    expect((await post('resend', large.body, large.headers)).status).toBe(413);

    const notJson = await post('postmark', '{"RecordType":', {
      'content-type': 'text/plain',
      authorization: `Basic ${Buffer.from(`${postmarkAuth.username}:${postmarkAuth.password}`).toString('base64')}`,
    });
    expect(notJson.status).toBe(400);
    expect(await feedbackRows(bed)).toEqual([]);
  });
});
