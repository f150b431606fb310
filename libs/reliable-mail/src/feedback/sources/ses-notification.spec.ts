import { describe, expect, it } from '@jest/globals';
import { FeedbackPayloadError } from '../../errors.js';
import { sesFeedbackOf } from './ses-notification.js';

const rowId = '0190f0a2-1111-7000-8000-00000000000a';
const mail = {
  messageId: '0100018d-ses',
  commonHeaders: { messageId: `<${rowId}@mail.example.com>` },
};
const at = '2026-12-03T10:00:00.000Z';

describe('sesFeedbackOf', () => {
  it.each([
    [
      'a permanent bounce',
      {
        notificationType: 'Bounce',
        mail,
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          timestamp: at,
          bouncedRecipients: [
            { emailAddress: 'A@example.org', status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 user unknown' },
          ],
        },
      },
      {
        kind: 'bounced',
        bounceType: 'hard',
        status: '5.1.1',
        diagnostic: 'smtp; 550 5.1.1 user unknown',
        suppress: true,
      },
    ],
    [
      'a permanent bounce of an address on SES’s suppression list, without a diagnostic',
      {
        notificationType: 'Bounce',
        mail,
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'OnAccountSuppressionList',
          timestamp: at,
          bouncedRecipients: [{ emailAddress: 'a@example.org' }],
        },
      },
      {
        kind: 'bounced',
        bounceType: 'hard',
        status: null,
        diagnostic: 'Permanent/OnAccountSuppressionList',
        suppress: true,
      },
    ],
    [
      'a transient bounce (mailbox full)',
      {
        eventType: 'Bounce',
        mail,
        bounce: {
          bounceType: 'Transient',
          bounceSubType: 'MailboxFull',
          timestamp: at,
          bouncedRecipients: [{ emailAddress: 'a@example.org', diagnosticCode: 'smtp; 552 5.2.2 over quota' }],
        },
      },
      { kind: 'bounced', bounceType: 'soft', status: '5.2.2', suppress: false },
    ],
    [
      'an undetermined bounce',
      {
        notificationType: 'Bounce',
        mail,
        bounce: {
          bounceType: 'Undetermined',
          bounceSubType: 'Undetermined',
          timestamp: at,
          bouncedRecipients: [{ emailAddress: 'a@example.org' }],
        },
      },
      { kind: 'bounced', bounceType: 'soft', suppress: false },
    ],
    [
      'a complaint',
      {
        notificationType: 'Complaint',
        mail,
        complaint: {
          timestamp: at,
          complaintFeedbackType: 'abuse',
          complainedRecipients: [{ emailAddress: 'a@example.org' }],
        },
      },
      { kind: 'complained', bounceType: null, diagnostic: 'abuse', suppress: true },
    ],
    [
      'a delivery',
      {
        eventType: 'Delivery',
        mail,
        delivery: { timestamp: at, recipients: ['a@example.org'], smtpResponse: '250 2.6.0 Message received' },
      },
      { kind: 'delivered', status: '2.6.0', diagnostic: '250 2.6.0 Message received', suppress: false },
    ],
    [
      'a delivery delay',
      {
        eventType: 'DeliveryDelay',
        mail,
        deliveryDelay: {
          timestamp: at,
          delayType: 'MailboxFull',
          delayedRecipients: [{ emailAddress: 'a@example.org', status: '4.2.2' }],
        },
      },
      { kind: 'delayed', status: '4.2.2', diagnostic: 'MailboxFull', suppress: false },
    ],
  ])('%s', (_case, notification, expected) => {
    expect(sesFeedbackOf(notification, 'sns-1')).toEqual({
      items: [
        expect.objectContaining({
          recipient: 'a@example.org',
          providerEventId: 'sns-1',
          providerMessageId: '0100018d-ses',
          rowId,
          messageId: `<${rowId}@mail.example.com>`,
          reportedAt: new Date(at),
          payload: notification,
          ...expected,
        }),
      ],
      ignored: null,
    });
  });

  it('one item per bounced recipient; the Message-ID from the headers when the common headers lack it', () => {
    const headersOnly = { messageId: 'x', headers: [{ name: 'Message-ID', value: `<${rowId}@mail.example.com>` }] };
    const { items } = sesFeedbackOf(
      {
        notificationType: 'Bounce',
        mail: headersOnly,
        bounce: {
          bounceType: 'Permanent',
          timestamp: at,
          bouncedRecipients: [{ emailAddress: 'a@example.org' }, { emailAddress: 'b@example.org' }],
        },
      },
      'sns-2',
    );
    expect(items.map((item) => [item.recipient, item.rowId])).toEqual([
      ['a@example.org', rowId],
      ['b@example.org', rowId],
    ]);
  });

  it.each(['Send', 'Reject', 'Open', 'Click', 'Rendering Failure', 'Received'])('ignores %s notifications', (type) => {
    expect(sesFeedbackOf({ eventType: type, mail }, 'sns-3')).toEqual({
      items: [],
      ignored: `SES ${type} notifications carry no delivery feedback`,
    });
  });

  it.each<[string, unknown, string]>([
    ['no type', { mail }, 'notificationType or eventType must be a string'],
    ['no mail', { notificationType: 'Bounce' }, 'mail must be an object'],
    [
      'a bounce without recipients',
      { notificationType: 'Bounce', mail, bounce: { bounceType: 'Permanent', timestamp: at } },
      'bounce.bouncedRecipients must be an array',
    ],
    [
      'a bounce with a bad date',
      {
        notificationType: 'Bounce',
        mail,
        bounce: { bounceType: 'Permanent', timestamp: 'soon', bouncedRecipients: [] },
      },
      'bounce.timestamp must be a date',
    ],
    [
      'a complaint naming no address',
      { notificationType: 'Complaint', mail, complaint: { timestamp: at, complainedRecipients: [{}] } },
      'complaint.complainedRecipients[0].emailAddress must be a string',
    ],
  ])('refuses %s', (_case, notification, reason) => {
    expect(() => sesFeedbackOf(notification, 'sns-4')).toThrow(new FeedbackPayloadError(reason));
  });
});
