import { describe, expect, it } from '@jest/globals';
import { FeedbackPayloadError } from '../../errors.js';
import {
  dsnFeedbackOf,
  headerFields,
  MAX_RECIPIENT_GROUPS,
  MAX_REPEATED_LENGTH,
  parseDeliveryStatus,
} from './delivery-status.js';

const context = {
  rowId: '0190f0a2-1111-7000-8000-00000000000a',
  messageId: null,
  providerEventId: '<dsn@mx.example.org>',
  payload: {},
  date: new Date('2026-12-03T12:00:00Z'),
  authenticates: (recipient: string) => recipient === 'a@example.org',
};

function report(...recipients: string[]): string {
  return ['Reporting-MTA: dns; mx.example.org', 'Arrival-Date: Thu, 3 Dec 2026 10:00:00 +0000', '', ...recipients].join(
    '\r\n',
  );
}

describe('headerFields', () => {
  it('joins folded lines, lower-cases names and keeps the first of a repeated field', () => {
    const fields = headerFields(
      'Diagnostic-Code: smtp; 550 5.1.1 <a@example.org>:\n    User unknown\nACTION: failed\nAction: delayed',
    );
    expect(Object.fromEntries(fields)).toEqual({
      'diagnostic-code': 'smtp; 550 5.1.1 <a@example.org>: User unknown',
      action: 'failed',
    });
  });
});

describe('parseDeliveryStatus', () => {
  it('reads the per-message group and one group per recipient', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; a@example.org\nAction: failed',
        '\n\nFinal-Recipient: rfc822; b@example.org\nAction: delivered',
      ),
    );
    expect(status.message.fields.get('reporting-mta')).toBe('dns; mx.example.org');
    expect(status.recipients.map(({ fields, recipient }) => [fields.get('final-recipient'), recipient])).toEqual([
      ['rfc822; a@example.org', 'a@example.org'],
      ['rfc822; b@example.org', 'b@example.org'],
    ]);
  });

  it.each([
    [
      'an Original-Recipient that names no address: the Final-Recipient',
      'Original-Recipient: rfc822; nobody',
      'a@example.org',
    ],
    ['one that does: it', 'Original-Recipient: rfc822; ann@example.org', 'ann@example.org'],
  ])('names the recipient of a group with %s', (_case, original, recipient) => {
    const status = parseDeliveryStatus(report(`Final-Recipient: rfc822; A@example.org\n${original}\nAction: failed`));
    expect(status.recipients.map((group) => group.recipient)).toEqual([recipient]);
  });

  it('leaves out a group that names no address, and keeps the others', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; nobody\nAction: failed',
        '\nFinal-Recipient: rfc822; b@example.org\nAction: failed',
        '\nFinal-Recipient: x400; <>\nOriginal-Recipient: rfc822; nobody either\nAction: failed',
      ),
    );
    expect(status.recipients.map((group) => group.recipient)).toEqual(['b@example.org']);
  });

  it('refuses a report in which no group names an address', () => {
    expect(() => parseDeliveryStatus(report('Final-Recipient: rfc822; nobody\nAction: failed'))).toThrow(
      new FeedbackPayloadError('the delivery-status part names no recipient address (Final-Recipient)'),
    );
  });

  it.each([
    [`${MAX_RECIPIENT_GROUPS} recipient groups`, MAX_RECIPIENT_GROUPS, 1, null],
    [
      `${MAX_RECIPIENT_GROUPS + 1} recipient groups`,
      MAX_RECIPIENT_GROUPS + 1,
      1,
      `the delivery-status part has ${MAX_RECIPIENT_GROUPS + 1} recipient groups, more than the ${MAX_RECIPIENT_GROUPS} a DSN may have`,
    ],
    [
      'a part of more than 1 MiB',
      2,
      600_000,
      /the delivery-status part has 12\d{5} bytes, more than the 1048576 a DSN may have$/,
    ],
  ])('%s: read up to the bounds, refused past them', (_case, groups, diagnosticLength, refusal) => {
    const text = report(
      ...Array.from(
        { length: groups },
        (_, index) =>
          `\nFinal-Recipient: rfc822; r${index}@example.org\nAction: failed\nDiagnostic-Code: smtp; ${'x'.repeat(diagnosticLength)}`,
      ),
    );
    if (refusal === null) expect(parseDeliveryStatus(text).recipients).toHaveLength(groups);
    else {
      expect(() => parseDeliveryStatus(text)).toThrow(FeedbackPayloadError);
      expect(() => parseDeliveryStatus(text)).toThrow(refusal);
    }
  });

  it.each(['', 'Reporting-MTA: dns; mx.example.org', report('Action: failed\nStatus: 5.1.1')])(
    'refuses a report without a Final-Recipient: %j',
    (text) => {
      expect(() => parseDeliveryStatus(text)).toThrow(FeedbackPayloadError);
    },
  );
});

describe('dsnFeedbackOf', () => {
  it.each([
    [
      'failed 5.1.1',
      'Action: failed\nStatus: 5.1.1',
      { kind: 'bounced', bounceType: 'hard', status: '5.1.1', suppress: true },
    ],
    ['failed 5.1.2', 'Action: failed\nStatus: 5.1.2', { kind: 'bounced', bounceType: 'hard', suppress: true }],
    [
      'failed 5.2.2 (mailbox full)',
      'Action: failed\nStatus: 5.2.2',
      { kind: 'bounced', bounceType: 'soft', suppress: false },
    ],
    [
      'failed 5.7.1 (refused content)',
      'Action: failed\nStatus: 5.7.1',
      { kind: 'bounced', bounceType: 'soft', suppress: false },
    ],
    [
      'failed 4.4.7 (expired)',
      'Action: failed\nStatus: 4.4.7',
      { kind: 'bounced', bounceType: 'soft', suppress: false },
    ],
    [
      'failed, the status only in the diagnostic',
      'Action: failed\nDiagnostic-Code: smtp; 550 5.1.1 user unknown',
      { kind: 'bounced', bounceType: 'hard', status: '5.1.1', diagnostic: '550 5.1.1 user unknown', suppress: true },
    ],
    [
      'delayed',
      'Action: delayed\nStatus: 4.4.1',
      { kind: 'delayed', bounceType: null, status: '4.4.1', suppress: false },
    ],
    [
      'delivered',
      'Action: Delivered (to mailbox)\nStatus: 2.0.0',
      { kind: 'delivered', bounceType: null, suppress: false },
    ],
  ])('%s', (_case, fields, expected) => {
    const status = parseDeliveryStatus(report(`Final-Recipient: rfc822; A@Example.org\n${fields}`));
    expect(dsnFeedbackOf(status, context)).toEqual([
      expect.objectContaining({ recipient: 'a@example.org', rowId: context.rowId, ...expected }),
    ]);
  });

  it('leaves relayed and expanded recipients out', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; a@example.org\nAction: relayed',
        '\nFinal-Recipient: rfc822; b@example.org\nAction: expanded',
      ),
    );
    expect(dsnFeedbackOf(status, context)).toEqual([]);
  });

  it('names the recipient as it was given (Original-Recipient) where the report says it', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; ann.smith@mail.example.org\nOriginal-Recipient: rfc822;ann@example.org\nAction: failed\nStatus: 5.1.1',
      ),
    );
    expect(dsnFeedbackOf(status, context)[0].recipient).toBe('ann@example.org');
  });

  it.each([
    ['the last attempt', 'Last-Attempt-Date: Thu, 3 Dec 2026 11:00:00 +0000 (UTC)', report, '2026-12-03T11:00:00.000Z'],
    ['the arrival', '', report, '2026-12-03T10:00:00.000Z'],
    ['the DSN itself', '', (recipient: string) => `Reporting-MTA: dns; mx\n\n${recipient}`, '2026-12-03T12:00:00.000Z'],
  ])('dates the feedback by %s', (_case, field, wrap, expected) => {
    const status = parseDeliveryStatus(wrap(`Final-Recipient: rfc822; a@example.org\nAction: failed\n${field}`));
    expect(dsnFeedbackOf(status, context)[0].reportedAt.toISOString()).toBe(expected);
  });

  it('gives each item the per-message group and its own group, not the others', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1',
        '\nFinal-Recipient: rfc822; b@example.org\nAction: delayed\nStatus: 4.4.1',
      ),
    );
    const perMessage = 'Reporting-MTA: dns; mx.example.org\r\nArrival-Date: Thu, 3 Dec 2026 10:00:00 +0000';
    expect(
      dsnFeedbackOf(status, { ...context, payload: { subject: 'Undelivered' } }).map((item) => item.payload),
    ).toEqual([
      {
        subject: 'Undelivered',
        deliveryStatus: `${perMessage}\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1`,
      },
      {
        subject: 'Undelivered',
        deliveryStatus: `${perMessage}\n\nFinal-Recipient: rfc822; b@example.org\nAction: delayed\nStatus: 4.4.1`,
      },
    ]);
  });

  it('cuts the per-message group that each item repeats', () => {
    const long = `Reporting-MTA: dns; ${'m'.repeat(5_000)}`;
    const status = parseDeliveryStatus(`${long}\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed`);
    const [item] = dsnFeedbackOf(status, context);
    expect(item.payload.deliveryStatus).toBe(
      `${long.slice(0, MAX_REPEATED_LENGTH - 1)}…\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed`,
    );
  });

  it('is authenticated for the recipients the DSN proves it speaks for, and for no other', () => {
    const status = parseDeliveryStatus(
      report(
        'Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1',
        '\nFinal-Recipient: rfc822; b@example.org\nAction: failed\nStatus: 5.1.1',
      ),
    );
    expect(dsnFeedbackOf(status, context).map((item) => [item.recipient, item.suppress, item.authenticated])).toEqual([
      ['a@example.org', true, true],
      ['b@example.org', true, false],
    ]);
  });
});
