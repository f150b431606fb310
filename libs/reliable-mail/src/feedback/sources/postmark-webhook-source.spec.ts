import { describe, expect, it } from '@jest/globals';
import { FeedbackPayloadError } from '../../errors.js';
import { postmarkFeedbackOf } from './postmark-webhook-source.js';

const at = '2026-12-03T10:00:00Z';
const bounce = (type: string, recordType = 'Bounce') => ({
  RecordType: recordType,
  ID: '4323372036854775807',
  Type: type,
  MessageID: 'pm-1',
  Email: 'A@example.org',
  BouncedAt: at,
  Details: 'smtp;550 5.1.1 The email account does not exist',
  Description: 'The server was unable to deliver your message',
});

describe('postmarkFeedbackOf', () => {
  it.each([
    ['HardBounce', 'bounced', 'hard', true],
    ['BadEmailAddress', 'bounced', 'hard', true],
    ['ManuallyDeactivated', 'bounced', 'hard', true],
    ['Transient', 'bounced', 'soft', false],
    ['SoftBounce', 'bounced', 'soft', false],
    ['DnsError', 'bounced', 'soft', false],
    ['Blocked', 'bounced', 'soft', false],
    ['SpamNotification', 'bounced', 'soft', false],
    ['Unknown', 'bounced', 'soft', false],
    ['SpamComplaint', 'complained', null, true],
  ])('a %s bounce is %s (%s)', (type, kind, bounceType, suppress) => {
    expect(postmarkFeedbackOf(bounce(type))).toEqual({
      items: [
        expect.objectContaining({
          recipient: 'a@example.org',
          kind,
          bounceType,
          suppress,
          providerEventId: '4323372036854775807',
          providerMessageId: 'pm-1',
          status: '5.1.1',
          diagnostic: 'smtp;550 5.1.1 The email account does not exist',
          reportedAt: new Date(at),
        }),
      ],
      ignored: null,
    });
  });

  it('a SpamComplaint record is a complaint', () => {
    expect(postmarkFeedbackOf(bounce('SpamComplaint', 'SpamComplaint')).items[0]).toMatchObject({
      kind: 'complained',
      suppress: true,
    });
  });

  it('a delivery is keyed by its message id, having no id of its own', () => {
    const delivery = {
      RecordType: 'Delivery',
      MessageID: 'pm-2',
      Recipient: 'a@example.org',
      DeliveredAt: at,
      Details: 'smtp;250 2.0.0 OK',
    };
    expect(postmarkFeedbackOf(delivery).items).toEqual([
      expect.objectContaining({
        kind: 'delivered',
        providerEventId: 'Delivery:pm-2',
        status: '2.0.0',
        suppress: false,
      }),
    ]);
  });

  it.each([
    'AutoResponder',
    'Subscribe',
    'Unsubscribe',
    'AddressChange',
    'OpenRelayTest',
    'ChallengeVerification',
    'InboundError',
  ])('ignores %s bounces', (type) => {
    expect(postmarkFeedbackOf(bounce(type))).toEqual({
      items: [],
      ignored: `Postmark ${type} bounces are not delivery feedback`,
    });
  });

  it.each(['Open', 'Click', 'SubscriptionChange'])('ignores %s records', (recordType) => {
    expect(postmarkFeedbackOf({ RecordType: recordType, MessageID: 'pm-3' }).ignored).toBe(
      `Postmark ${recordType} records carry no delivery feedback`,
    );
  });

  it.each<[string, unknown, string]>([
    ['no record type', { MessageID: 'x' }, 'RecordType must be a string'],
    ['no message id', { RecordType: 'Bounce' }, 'MessageID must be a string'],
    ['a bounce without a date', { ...bounce('HardBounce'), BouncedAt: undefined }, 'BouncedAt must be a string'],
    [
      'a delivery without a recipient',
      { RecordType: 'Delivery', MessageID: 'x', DeliveredAt: at },
      'Recipient must be a string',
    ],
  ])('refuses %s', (_case, record, reason) => {
    expect(() => postmarkFeedbackOf(record)).toThrow(new FeedbackPayloadError(reason));
  });
});
