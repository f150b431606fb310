import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { MailOutboxHealthIndicator, OutboxRetention } from '@reliable-mail/nestjs';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

/** Collects on demand: the app's metrics as an OpenTelemetry SDK would export them. */
class OnDemandReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const headers = { 'content-type': 'application/json', 'x-webhook-secret': 'secret' };
const sources = { postmark: { header: { name: 'X-Webhook-Secret', value: 'secret' } } };

function postmarkRecord(recordType: 'Bounce' | 'SpamComplaint', messageId: string, email: string, type = 'HardBounce') {
  return JSON.stringify({
    RecordType: recordType,
    ID: Math.floor(Math.random() * 1e12),
    Type: recordType === 'SpamComplaint' ? 'SpamComplaint' : type,
    MessageID: messageId,
    Email: email,
    BouncedAt: new Date().toISOString(),
    Details: 'smtp;550 5.1.1 no such user',
  });
}

describe('bounces and complaints in health, metrics and retention', () => {
  const bed = useTestBed();
  const reader = new OnDemandReader();

  beforeAll(() => {
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  });

  /** An app whose SMTP server answers each mail with its own Postmark id, and four mails sent through it. */
  async function sendFour(health = {}) {
    let sent = 0;
    const started = await startWebhookApp(bed, sources, {
      script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as pm-${++sent}` }) },
      overrides: { health },
    });
    for (let index = 0; index < 4; index++) await started.sendMail(`customer-${index}@example.org`);
    return started;
  }

  it('health counts them per window and fails on a complaint or hard bounce rate over its threshold', async () => {
    const { app, post } = await sendFour({ minSentForRates: 4 });
    for (const body of [
      postmarkRecord('SpamComplaint', 'pm-1', 'customer-0@example.org'),
      postmarkRecord('Bounce', 'pm-2', 'customer-1@example.org'),
      postmarkRecord('Bounce', 'pm-3', 'customer-2@example.org', 'Transient'),
      postmarkRecord('Bounce', `pm-${randomUUID()}`, 'stranger@example.org'),
    ]) {
      expect((await post('postmark', body, headers)).status).toBe(200);
    }

    const { mail } = await app.get(MailOutboxHealthIndicator).isHealthy('mail');
    expect(mail).toMatchObject({
      status: 'down',
      failing: ['complaintRate', 'hardBounceRate'],
      feedback: {
        windowMs: 86_400_000,
        sent: 4,
        hardBounces: 2,
        softBounces: 1,
        complaints: 1,
        unlinked: 1,
        complaintRate: 0.25,
        maxComplaintRate: 0.001,
        hardBounceRate: 0.5,
        maxHardBounceRate: 0.05,
      },
    });
    // Below the minimum of mails sent, the rates are shown but judge nothing.
    expect(await app.get(MailOutboxHealthIndicator).isHealthy('mail', { minSentForRates: 5 })).toMatchObject({
      mail: { status: 'up', feedback: { complaintRate: 0.25 } },
    });

    const { resourceMetrics } = await reader.collect();
    const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    const points = (name: string) => all.find((metric) => metric.descriptor.name === name)?.dataPoints ?? [];
    expect(points('reliable_mail.feedback').map((point) => [point.attributes, point.value])).toEqual(
      expect.arrayContaining([
        [{ source: 'postmark', kind: 'complained', bounce_type: 'none', linked: true }, 1],
        [{ source: 'postmark', kind: 'bounced', bounce_type: 'hard', linked: true }, 1],
        [{ source: 'postmark', kind: 'bounced', bounce_type: 'soft', linked: true }, 1],
        [{ source: 'postmark', kind: 'bounced', bounce_type: 'hard', linked: false }, 1],
      ]),
    );
    expect(points('reliable_mail.feedback.rate').map((point) => [point.attributes, point.value])).toEqual(
      expect.arrayContaining([
        [{ kind: 'complaint' }, 0.25],
        [{ kind: 'hard_bounce' }, 0.5],
      ]),
    );
  });

  it('retention deletes feedback with its row, and feedback that named no row once it is as old', async () => {
    const { app, post } = await sendFour();
    await post('postmark', postmarkRecord('Bounce', 'pm-1', 'customer-0@example.org'), headers);
    await post('postmark', postmarkRecord('Bounce', 'unknown-1', 'stranger@example.org'), headers);
    await post('postmark', postmarkRecord('Bounce', 'unknown-2', 'recent@example.org'), headers);
    await bed.execute(`update mail_outbox set updated_at = now() - interval '31 days'`);
    await bed.execute(
      `update mail_outbox_feedback set received_at = now() - interval '31 days' where recipient <> 'recent@example.org'`,
    );

    expect(await app.get(OutboxRetention).run()).toBe(4);
    expect((await feedbackRows(bed)).map((row) => row.recipient)).toEqual(['recent@example.org']);
  });
});
