import { describe, expect, it } from '@jest/globals';
import { FeedbackPayloadError } from '../../errors.js';
import { resendFeedbackOf } from './resend-webhook-source.js';

const at = '2026-12-03T10:00:00.000Z';
const event = (type: string, data: Record<string, unknown> = {}) => ({
  type,
  created_at: at,
  data: { email_id: 're-1', to: ['a@example.org'], ...data },
});

describe('resendFeedbackOf', () => {
  it.each([
    [
      'a permanent bounce',
      event('email.bounced', {
        bounce: { type: 'Permanent', subType: 'Suppressed', message: '550 5.1.1 no such user' },
      }),
      { kind: 'bounced', bounceType: 'hard', status: '5.1.1', diagnostic: '550 5.1.1 no such user', suppress: true },
    ],
    [
      'a transient bounce',
      event('email.bounced', { bounce: { type: 'Transient', subType: 'MailboxFull', message: 'Mailbox full' } }),
      { kind: 'bounced', bounceType: 'soft', status: null, suppress: false },
    ],
    [
      'an undetermined bounce',
      event('email.bounced', { bounce: { type: 'Undetermined', subType: 'Undetermined' } }),
      { kind: 'bounced', bounceType: 'soft', diagnostic: null, suppress: false },
    ],
    ['a complaint', event('email.complained'), { kind: 'complained', bounceType: null, suppress: true }],
    ['a delivery', event('email.delivered'), { kind: 'delivered', bounceType: null, suppress: false }],
    ['a delay', event('email.delivery_delayed'), { kind: 'delayed', bounceType: null, suppress: false }],
    ['a recipient given as a string', event('email.delivered', { to: 'A@Example.org' }), { kind: 'delivered' }],
  ])('%s', (_case, input, expected) => {
    expect(resendFeedbackOf(input, 'msg_1')).toEqual({
      items: [
        expect.objectContaining({
          recipient: 'a@example.org',
          providerEventId: 'msg_1',
          providerMessageId: 're-1',
          rowId: null,
          reportedAt: new Date(at),
          payload: input,
          ...expected,
        }),
      ],
      ignored: null,
    });
  });

  it('a hard bounce of an email to several recipients names each and suppresses none', () => {
    const input = event('email.bounced', { to: ['a@example.org', 'b@example.org'], bounce: { type: 'Permanent' } });
    expect(resendFeedbackOf(input, 'msg_2').items.map((item) => [item.recipient, item.suppress])).toEqual([
      ['a@example.org', false],
      ['b@example.org', false],
    ]);
  });

  it.each(['email.sent', 'email.opened', 'email.clicked', 'email.failed', 'contact.created'])('ignores %s', (type) => {
    expect(resendFeedbackOf(event(type), 'msg_3')).toEqual({
      items: [],
      ignored: `Resend ${type} events carry no delivery feedback`,
    });
  });

  it.each<[string, unknown, string]>([
    ['no type', { data: {} }, 'type must be a string'],
    ['no data', { type: 'email.delivered', created_at: at }, 'data must be an object'],
    ['no recipients', event('email.delivered', { to: undefined }), 'data.to must be an array'],
    ['no email id', event('email.delivered', { email_id: undefined }), 'data.email_id must be a string'],
    ['a bounce without its bounce', event('email.bounced'), 'data.bounce must be an object'],
    ['no date', { ...event('email.delivered'), created_at: undefined }, 'created_at must be a string'],
  ])('refuses %s', (_case, input, reason) => {
    expect(() => resendFeedbackOf(input, 'msg_4')).toThrow(new FeedbackPayloadError(reason));
  });
});
