import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { RESEND_SECRET, signedResendEvent, svixHeaders } from './support/resend-events.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
const permanent = {
  bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 The email account does not exist' },
};

describe('Resend feedback (Svix signatures)', () => {
  const bed = useTestBed();

  /** An app whose SMTP server answers with Resend's id for the message, as a Resend transport stores it. */
  async function start(resendId: string) {
    return startWebhookApp(
      bed,
      { resend: { secret: ['whsec_b2xkIHNlY3JldCBiZWluZyByb3RhdGVkIG91dA==', RESEND_SECRET] } },
      { script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as ${resendId}` }) } },
    );
  }

  it('a hard bounce: linked by Resend’s id, suppressed, EmailBouncedEvent once; delivered twice, stored once', async () => {
    const resendId = randomUUID();
    const { app, post, sendMail, outbox, admin } = await start(resendId);
    const mail = await sendMail('gone@example.org');
    const event = signedResendEvent('email.bounced', resendId, ['gone@example.org'], permanent);

    const first = await post('resend', event.body, event.headers);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ stored: 1, duplicates: 0, unlinked: 0, ignored: null });
    expect(await (await post('resend', event.body, event.headers)).json()).toMatchObject({ stored: 0, duplicates: 1 });

    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({
        source: 'resend',
        kind: 'bounced',
        bounceType: 'hard',
        status: '5.1.1',
        providerEventId: event.headers['svix-id'],
        providerMessageId: resendId,
      }),
    ]);
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({
        address: 'gone@example.org',
        source: 'bounce',
        reason: expect.stringMatching(/^resend hard bounce: 5\.1\.1/),
      }),
    ]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    await settle();
    expect(app.events.bounced).toEqual([expect.objectContaining({ id: mail.id, source: 'resend', suppressed: true })]);
  });

  it('a complaint about a mail to two recipients stores both and suppresses neither (Resend does not say which)', async () => {
    const resendId = randomUUID();
    const { app, post, sendMail, admin } = await start(resendId);
    const mail = await sendMail(['ann@example.org', 'bob@example.org']);
    const event = signedResendEvent('email.complained', resendId, ['ann@example.org', 'bob@example.org']);
    expect(await (await post('resend', event.body, event.headers)).json()).toMatchObject({ stored: 2 });
    expect(await admin.listSuppressions()).toEqual([]);
    await waitFor('two EmailComplainedEvents', () => app.events.complained.length === 2);
    expect(app.events.complained.map((complaint) => [complaint.id, complaint.suppressed])).toEqual([
      [mail.id, false],
      [mail.id, false],
    ]);
  });

  it('a soft bounce, a delay and a delivery; an open event is acknowledged and ignored', async () => {
    const resendId = randomUUID();
    const { app, post, sendMail, outbox, admin } = await start(resendId);
    const mail = await sendMail('ann@example.org');
    const soft = { bounce: { type: 'Transient', subType: 'MailboxFull', message: '552 5.2.2 Mailbox full' } };
    for (const [type, data] of [
      ['email.bounced', soft],
      ['email.delivery_delayed', {}],
      ['email.delivered', {}],
    ] as const) {
      const event = signedResendEvent(type, resendId, ['ann@example.org'], data);
      expect((await post('resend', event.body, event.headers)).status).toBe(200);
    }
    const opened = signedResendEvent('email.opened', resendId, ['ann@example.org']);
    expect(await (await post('resend', opened.body, opened.headers)).json()).toMatchObject({
      stored: 0,
      ignored: 'Resend email.opened events carry no delivery feedback',
    });

    expect((await outbox.get(mail.id)).feedback.map(({ kind, bounceType }) => [kind, bounceType])).toEqual([
      ['bounced', 'soft'],
      ['delayed', null],
      ['delivered', null],
    ]);
    expect(await admin.listSuppressions()).toEqual([]);
    await waitFor('events', () => app.events.bounced.length === 1 && app.events.delivered.length === 1);
  });

  it('an event for an email Resend id the outbox does not know is stored unlinked, with no event', async () => {
    const { app, post } = await start(randomUUID());
    const event = signedResendEvent('email.bounced', randomUUID(), ['gone@example.org'], permanent);
    expect(await (await post('resend', event.body, event.headers)).json()).toMatchObject({ stored: 1, unlinked: 1 });
    expect(await feedbackRows(bed)).toEqual([
      expect.objectContaining({ outbox_id: null, recipient: 'gone@example.org' }),
    ]);
    await settle();
    expect(app.events.bounced).toEqual([]);
  });

  it.each([
    [
      'a tampered body',
      (event: ReturnType<typeof signedResendEvent>) => ({ ...event, body: event.body.replace('gone@', 'ceo@') }),
    ],
    [
      'another secret',
      () =>
        signedResendEvent('email.bounced', 'x', ['gone@example.org'], permanent, {
          secret: `whsec_${Buffer.from('not ours').toString('base64')}`,
        }),
    ],
    [
      'a signature older than 5 minutes (a replay)',
      () =>
        signedResendEvent('email.bounced', 'x', ['gone@example.org'], permanent, {
          at: new Date(Date.now() - 6 * 60_000),
        }),
    ],
    [
      'no svix headers',
      (event: ReturnType<typeof signedResendEvent>) => ({ ...event, headers: { 'content-type': 'application/json' } }),
    ],
  ])('%s: 401 and nothing written', async (_case, spoil) => {
    const { post, admin } = await start(randomUUID());
    const event = spoil(signedResendEvent('email.bounced', 'x', ['gone@example.org'], permanent));
    const response = await post('resend', event.body, event.headers);
    expect(response.status).toBe(401);
    expect(await feedbackRows(bed)).toEqual([]);
    expect(await admin.listSuppressions()).toEqual([]);
  });

  it.each([
    // Nest's JSON body parser answers this one before the route.
    ['a body that is not JSON', '{"type": "email.bounced",', /JSON/],
    [
      'a bounce without its bounce object',
      JSON.stringify({
        type: 'email.bounced',
        created_at: '2026-12-03T10:00:00Z',
        data: { email_id: 'x', to: ['a@example.org'] },
      }),
      /^Malformed feedback: data\.bounce must be an object$/,
    ],
    [
      'a recipient that is no address',
      JSON.stringify({
        type: 'email.delivered',
        created_at: '2026-12-03T10:00:00Z',
        data: { email_id: 'x', to: ['nobody'] },
      }),
      /^Malformed feedback: data\.to\[0\] must be an email address$/,
    ],
  ])('%s, signed: 400 with the reason', async (_case, body, reason) => {
    const { post } = await start(randomUUID());
    const response = await post('resend', body, svixHeaders(body));
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toMatch(reason);
    expect(await feedbackRows(bed)).toEqual([]);
  });
});
