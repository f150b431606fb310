import { afterEach, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  FeedbackPayloadError,
  FeedbackSignatureError,
  MailFeedbackService,
  MailOutboxService,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { dsnReport } from '../libs/reliable-mail/src/feedback/sources/dsn-report.js';
import { verpAddress } from '../libs/reliable-mail/src/shared/verp.js';
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
/** The same, as the options resolve it. */
const resolvedVerp = { domain: verp.domain, localPart: 'bounces', secrets: [verp.secret] };

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
  async function connection(): Promise<pg.Client> {
    if (!client) {
      client = new pg.Client({ connectionString: bed.databaseUrl });
      await client.connect();
    }
    return client;
  }
  async function counts() {
    const { rows } = await (
      await connection()
    ).query<{ feedback: number; suppressions: number; rows: number }>(
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
    // Each stored item suppresses one recipient at most.
    expect(after.suppressions - before.suppressions).toBeLessThanOrEqual(stored);
    expect(after.rows).toBe(before.rows);
  }

  /** The suppression list, as `<row id> <address>`. */
  async function suppressed(): Promise<Set<string>> {
    const { rows } = await (
      await connection()
    ).query<{ entry: string }>(`select outbox_id || ' ' || address as entry from mail_suppression`);
    return new Set(rows.map((row) => row.entry));
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
        fc.asyncProperty(dsnEmail(known, verpAddresses), async (raw) => {
          const before = await suppressed();
          await storedOrRefused(() => feedback.ingestDsn(raw));
          // What the parser made of it: an item it calls authenticated came to the VERP address made for its row
          // and recipient, which only that recipient's copy carried.
          const { items } = await dsnReport(raw, resolvedVerp).catch((error: unknown) => {
            if (error instanceof FeedbackPayloadError) return { items: [] };
            throw error;
          });
          const headers = raw.slice(0, raw.indexOf('\r\n\r\n')).toLowerCase();
          const proven = new Set<string>();
          for (const item of items.filter((entry) => entry.authenticated)) {
            expect(headers).toContain(verpAddress(resolvedVerp, item.rowId!, item.recipient).toLowerCase());
            if (item.suppress) proven.add(`${item.rowId} ${item.recipient}`);
          }
          // Only such an item puts its recipient on the suppression list.
          for (const entry of await suppressed()) if (!before.has(entry)) expect(proven).toContain(entry);
        }),
        propertyRuns('DSN emails through PostgreSQL'),
      );
    },
    FINISHES_WITHIN_MS,
  );
});
