import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  dsnEmail,
  type KnownMail,
  postmarkRecord,
  resendEvent,
  sesNotification,
} from '../../../../test/support/hostile-feedback.js';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { RESEND_SECRET, svixHeaders } from '../../../../test/support/resend-events.js';
import { isStorableDate } from '../database/storable.js';
import { FeedbackPayloadError } from '../errors.js';
import { verpAddress } from '../shared/verp.js';
import { addressIn, type FeedbackReport, parseJson } from './feedback-report.js';
import { dsnReport } from './sources/dsn-report.js';
import { postmarkWebhookSource } from './sources/postmark-webhook-source.js';
import { resendWebhookSource } from './sources/resend-webhook-source.js';
import { sesFeedbackOf } from './sources/ses-notification.js';

// Every parser, given anything a peer may send, reads feedback the statement can store or throws
// FeedbackPayloadError: never another error, never an item PostgreSQL would refuse (the statement itself makes its
// text storable; see test/feedback-properties.e2e-spec.ts for the same through PostgreSQL).

/** A generous bound for a thousand runs on a busy 2-core machine (they take seconds to a minute). */
const FINISHES_WITHIN_MS = 600_000;
const known: KnownMail = {
  messageIds: ['<0190f0a2-1111-7000-8000-00000000000a@test.example.com>'],
  providerIds: ['pm-1', 're_1', '0100018d-ses-1'],
  recipients: ['ann@example.org', 'bob@example.org'],
};
const verp = { domain: 'bounces.example.com', localPart: 'bounces', secrets: ['s'.repeat(32)] };
const rowId = '0190f0a2-1111-7000-8000-00000000000a';

/** What the statement needs of every item: a date it stores, an address its index takes, JSON it can write. */
function expectStorable(report: FeedbackReport): void {
  for (const item of report.items) {
    expect(isStorableDate(item.reportedAt)).toBe(true);
    expect(item.recipient.length).toBeLessThanOrEqual(254);
    expect(addressIn(item.recipient)).toBe(item.recipient);
    // The table's check: a bounce has a bounce type, nothing else has one.
    expect(item.kind === 'bounced').toBe(item.bounceType !== null);
    expect(() => JSON.stringify(item)).not.toThrow();
  }
}

/** Runs `read`: it may throw FeedbackPayloadError, nothing else; what it returns must be storable. */
async function readsOrRefuses(read: () => Promise<FeedbackReport> | FeedbackReport): Promise<void> {
  let report: FeedbackReport;
  try {
    report = await read();
  } catch (error) {
    if (error instanceof FeedbackPayloadError) return;
    throw error;
  }
  expectStorable(report);
}

describe('feedback parsers, given hostile input', () => {
  it(
    'Postmark records: storable feedback or FeedbackPayloadError',
    async () => {
      const source = await postmarkWebhookSource({ header: { name: 'x-secret', value: 'secret' } });
      await fc.assert(
        fc.asyncProperty(postmarkRecord(known), (body) =>
          readsOrRefuses(() => source.receive(Buffer.from(body), { 'x-secret': 'secret' })),
        ),
        propertyRuns('Postmark records'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'Resend events: storable feedback or FeedbackPayloadError',
    async () => {
      const source = await resendWebhookSource({ secret: RESEND_SECRET });
      await fc.assert(
        fc.asyncProperty(resendEvent(known), (body) =>
          readsOrRefuses(() => source.receive(Buffer.from(body), svixHeaders(body))),
        ),
        propertyRuns('Resend events'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'SES notifications: storable feedback or FeedbackPayloadError',
    async () => {
      await fc.assert(
        fc.asyncProperty(sesNotification(known), (body) =>
          readsOrRefuses(() => sesFeedbackOf(parseJson(body), 'sns-message-id')),
        ),
        propertyRuns('SES notifications'),
      );
    },
    FINISHES_WITHIN_MS,
  );

  it(
    'DSN emails with hostile headers and delivery-status fields: storable feedback or FeedbackPayloadError',
    async () => {
      const addresses = known.recipients.map((address) => verpAddress(verp, rowId, address));
      await fc.assert(
        fc.asyncProperty(dsnEmail(known, addresses), (raw) => readsOrRefuses(() => dsnReport(raw, verp))),
        propertyRuns('DSN emails'),
      );
    },
    FINISHES_WITHIN_MS,
  );
});
