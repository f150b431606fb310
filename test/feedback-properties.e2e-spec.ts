import { afterEach, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  FeedbackPayloadError,
  FeedbackSignatureError,
  MailFeedbackService,
  MailOutboxService,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { dsnEmail, type KnownMail, postmarkRecord, resendEvent, sesNotification } from './support/hostile-feedback.js';
import { propertyRuns } from './support/property-runs.js';
import { RESEND_SECRET, svixHeaders } from './support/resend-events.js';
import { useSnsTestServer } from './support/sns-test-server.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { startWebhookApp } from './support/webhook-app.js';

/** A generous bound for a thousand runs on a busy 2-core machine (they take seconds to a minute). */
const FINISHES_WITHIN_MS = 600_000;
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-feedback';
const postmarkHeader = { name: 'x-webhook-secret', value: 'a-postmark-webhook-secret' };
const verp = { domain: 'bounces.example.com', secret: 'a-VERP-secret-of-at-least-32-characters' };

/**
 * Hostile feedback of every source through the real statement against PostgreSQL: each report is stored (as many
 * feedback rows as the result says, no more) or refused with FeedbackPayloadError or FeedbackSignatureError, having
 * written nothing. A database error, or any other error (a route's 500), fails the property.
 */
describe('feedback properties, through PostgreSQL', () => {
  const bed = useTestBed();
  const sns = useSnsTestServer();

  /** An app with every webhook source and VERP; two mails sent, and what reports about them may name. */
  async function start() {
    let queued = 0;
    const { app, outbox } = await startWebhookApp(
      bed,
      {
        postmark: { header: postmarkHeader },
        resend: { secret: RESEND_SECRET },
        ses: { topicArns: [TOPIC], agent: sns().agent },
      },
      {
        script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as provider-${++queued}` }) },
        overrides: { verp },
      },
    );
    const rows = [
      await outbox.enqueue({ to: 'ann@example.org', bcc: 'bob@example.org', subject: 'Your order', text: 'x' }),
      await outbox.enqueue({ to: 'cid@example.org', subject: 'Your order', text: 'x' }),
    ];
    await waitFor('both sent', () => app.events.sent.length === 2);
    const stored = await Promise.all(rows.map((row) => app.get(MailOutboxService).get(row.id)));
    const known: KnownMail = {
      messageIds: rows.map((row) => row.messageId),
      providerIds: stored.flatMap((row) => (row.providerMessageId ? [row.providerMessageId] : [])),
      recipients: ['ann@example.org', 'bob@example.org', 'cid@example.org'],
    };
    const verpAddresses = bed.smtp.received.map((message) => message.sender);
    return { feedback: app.get(MailFeedbackService), known, verpAddresses };
  }

  // One connection for the counts of a whole property: a thousand runs, two counts each.
  let client: pg.Client | undefined;
  afterEach(async () => {
    await client?.end();
    client = undefined;
  });
  async function counts() {
    if (!client) {
      client = new pg.Client({ connectionString: bed.databaseUrl });
      await client.connect();
    }
    const { rows } = await client.query<{ feedback: number; suppressions: number; rows: number }>(
      `select (select count(*)::int from mail_outbox_feedback) as feedback,
              (select count(*)::int from mail_suppression) as suppressions,
              (select count(*)::int from mail_outbox) as rows`,
    );
    return rows[0];
  }

  /** Ingests one report: stored as the result says, or refused with a typed error and nothing written. */
  async function storedOrRefused(ingest: () => Promise<{ stored: number }>): Promise<void> {
    const before = await counts();
    let stored: number;
    try {
      ({ stored } = await ingest());
    } catch (error) {
      if (!(error instanceof FeedbackPayloadError) && !(error instanceof FeedbackSignatureError)) throw error;
      expect(await counts()).toEqual(before);
      return;
    }
    const after = await counts();
    expect(after.feedback - before.feedback).toBe(stored);
    expect(after.suppressions).toBeGreaterThanOrEqual(before.suppressions);
    expect(after.rows).toBe(before.rows);
  }

  it(
    'Postmark records',
    async () => {
      const { feedback, known } = await start();
      const headers = { [postmarkHeader.name]: postmarkHeader.value };
      await fc.assert(
        fc.asyncProperty(postmarkRecord(known), (body) =>
          storedOrRefused(() => feedback.ingest('postmark', body, headers)),
        ),
        propertyRuns('Postmark records through PostgreSQL'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'Resend events',
    async () => {
      const { feedback, known } = await start();
      await fc.assert(
        fc.asyncProperty(resendEvent(known), (body) =>
          storedOrRefused(() => feedback.ingest('resend', body, svixHeaders(body))),
        ),
        propertyRuns('Resend events through PostgreSQL'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'SES notifications through SNS',
    async () => {
      const { feedback, known } = await start();
      await fc.assert(
        fc.asyncProperty(sesNotification(known), (notification) =>
          storedOrRefused(() => feedback.ingest('ses', JSON.stringify(sns().notification(TOPIC, notification)), {})),
        ),
        propertyRuns('SES notifications through PostgreSQL'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'DSN emails',
    async () => {
      const { feedback, known, verpAddresses } = await start();
      await fc.assert(
        fc.asyncProperty(dsnEmail(known, verpAddresses), (raw) => storedOrRefused(() => feedback.ingestDsn(raw))),
        propertyRuns('DSN emails through PostgreSQL'),
      );
    },
    FINISHES_WITHIN_MS,
  );
});
