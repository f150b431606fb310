import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { PostmarkTestApi } from './support/postmark-test-api.js';
import { postmarkTransport } from './support/provider-stand-ins.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { feedbackRows, startWebhookApp } from './support/webhook-app.js';

const credentials = { username: 'postmark', password: 's3cret-webhook-password' };
const secretHeader = { name: 'X-Webhook-Secret', value: 'another-secret' };
const authorized = {
  'content-type': 'application/json',
  authorization: `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
  'x-webhook-secret': secretHeader.value,
};

/** A bounce record as Postmark posts it; `id` is written as the digits it is, beyond JavaScript's safe integers. */
function bounce(id: string, messageId: string, email: string, type = 'HardBounce', recordType = 'Bounce'): string {
  return `{"RecordType":"${recordType}","MessageStream":"outbound","ID":${id},"Type":"${type}","TypeCode":1,
    "Name":"Hard bounce","MessageID":"${messageId}","ServerID":23,
    "Description":"The server was unable to deliver your message (ex: unknown user, mailbox not found).",
    "Details":"smtp;550 5.1.1 The email account that you tried to reach does not exist.","Email":"${email}",
    "From":"shop@example.com","BouncedAt":"2026-12-03T10:00:00.1234567Z","Inactive":true,"CanActivate":true,
    "Subject":"Your order"}`;
}

function delivery(messageId: string, recipient: string): string {
  return JSON.stringify({
    RecordType: 'Delivery',
    ServerID: 23,
    MessageStream: 'outbound',
    MessageID: messageId,
    Recipient: recipient,
    DeliveredAt: '2026-12-03T10:00:00Z',
    Details: 'smtp;250 2.0.0 OK 1733220000 gsmtp',
  });
}

describe('Postmark feedback (basic auth and a secret header)', () => {
  const bed = useTestBed();

  async function start(postmarkId: string) {
    return startWebhookApp(
      bed,
      { postmark: { basicAuth: credentials, header: secretHeader } },
      { script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as ${postmarkId}` }) } },
    );
  }

  it('a bounce for a mail sent in many requests is linked by the id of the request its recipient was in', async () => {
    const api = await new PostmarkTestApi().start();
    try {
      const { app, post, outbox, admin } = await startWebhookApp(
        bed,
        { postmark: { basicAuth: credentials, header: secretHeader } },
        { overrides: { transport: postmarkTransport(api) } },
      );
      // Ann and 49 Bcc recipients in the first request, then one request for each of the other 11.
      const bcc = Array.from({ length: 60 }, (_, index) => `reader${index}@example.org`);
      const mail = await outbox.enqueue({ to: 'ann@example.org', bcc, subject: 'Minutes', text: 'x' });
      await waitFor('the sent event', () => app.events.sent.length === 1);
      const request = api.messages.find((message) => message.recipients.includes('reader55@example.org'))!;
      expect(request.id).not.toBe((await outbox.get(mail.id)).providerMessageId);

      const answer = await post('postmark', bounce('77', request.id, 'reader55@example.org'), authorized);
      expect(await answer.json()).toEqual({ stored: 1, duplicates: 0, unlinked: 0, ignored: null });
      expect((await outbox.get(mail.id)).feedback).toEqual([
        expect.objectContaining({ kind: 'bounced', recipient: 'reader55@example.org', providerMessageId: request.id }),
      ]);
      expect(await admin.listSuppressions()).toEqual([
        expect.objectContaining({ address: 'reader55@example.org', outboxId: mail.id }),
      ]);
      await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
      expect(app.events.bounced[0]).toMatchObject({ id: mail.id, messageId: mail.messageId });
    } finally {
      await api.close();
    }
  });

  it('a hard bounce with an ID past 2^53: linked, suppressed, EmailBouncedEvent once; posted twice, stored once', async () => {
    const postmarkId = randomUUID();
    const { app, post, sendMail, outbox, admin } = await start(postmarkId);
    const mail = await sendMail('gone@example.org');
    const body = bounce('4323372036854775807', postmarkId, 'gone@example.org');

    const first = await post('postmark', body, authorized);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ stored: 1, duplicates: 0, unlinked: 0, ignored: null });
    expect(await (await post('postmark', body, authorized)).json()).toMatchObject({ stored: 0, duplicates: 1 });
    // One more than the first: the same number once both are rounded to JavaScript's doubles.
    expect(
      await (await post('postmark', bounce('4323372036854775808', postmarkId, 'gone@example.org'), authorized)).json(),
    ).toMatchObject({ stored: 1 });

    expect((await outbox.get(mail.id)).feedback.map((entry) => entry.providerEventId)).toEqual([
      '4323372036854775807',
      '4323372036854775808',
    ]);
    expect((await outbox.get(mail.id)).feedback[0]).toMatchObject({
      source: 'postmark',
      kind: 'bounced',
      bounceType: 'hard',
      status: '5.1.1',
      providerMessageId: postmarkId,
      reportedAt: new Date('2026-12-03T10:00:00.123Z'),
    });
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({ address: 'gone@example.org', source: 'bounce', outboxId: mail.id }),
    ]);
    await waitFor('EmailBouncedEvents', () => app.events.bounced.length === 2);
    expect(app.events.bounced[0]).toMatchObject({ id: mail.id, bounceType: 'hard', suppressed: true });
  });

  it('a soft bounce is not suppressed; a spam complaint is; a delivery, posted twice, is stored once', async () => {
    const postmarkId = randomUUID();
    const { app, post, sendMail, outbox, admin } = await start(postmarkId);
    const mail = await sendMail(['ann@example.org', 'bob@example.org']);
    for (const body of [
      bounce('1001', postmarkId, 'ann@example.org', 'Transient'),
      bounce('1002', postmarkId, 'bob@example.org', 'SpamComplaint', 'SpamComplaint'),
      delivery(postmarkId, 'ann@example.org'),
      delivery(postmarkId, 'ann@example.org'),
    ]) {
      expect((await post('postmark', body, authorized)).status).toBe(200);
    }
    const feedback = (await outbox.get(mail.id)).feedback.map(({ recipient, kind, bounceType }) => [
      recipient,
      kind,
      bounceType,
    ]);
    // Oldest report first: the delivery was reported before the bounce and the complaint (both at one time).
    expect(feedback[0]).toEqual(['ann@example.org', 'delivered', null]);
    expect(feedback.slice(1)).toEqual(
      expect.arrayContaining([
        ['ann@example.org', 'bounced', 'soft'],
        ['bob@example.org', 'complained', null],
      ]),
    );
    expect(feedback).toHaveLength(3);
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({ address: 'bob@example.org', source: 'complaint' }),
    ]);
    await waitFor('events', () => app.events.complained.length === 1 && app.events.delivered.length === 1);
  });

  // Half of an emoji where the suppression reason ("postmark hard bounce: 5.1.1 smtp;550 5.1.1 …") is cut at 500.
  const beforeTheCut = 'postmark hard bounce: 5.1.1 smtp;550 5.1.1 ';
  // The emoji's high surrogate at code unit 498, where the cut to 499 units and an ellipsis falls.
  const pad = 'a'.repeat(500 - beforeTheCut.length - 2);
  const splitAtTheCut = `550 5.1.1 ${pad}😀 gone`;
  it.each([
    [
      'Details with a lone surrogate',
      (body: string) => body.replace('does not exist.', 'does not exist \\ud800.'),
      `${beforeTheCut}The email account that you tried to reach does not exist \uFFFD.`,
    ],
    [
      'Details whose emoji the 500-character suppression reason cuts',
      (body: string) =>
        body.replace('550 5.1.1 The email account that you tried to reach does not exist.', splitAtTheCut),
      // Cut before the emoji, not between its halves.
      `${beforeTheCut}${pad}…`,
    ],
  ])(
    'a hard bounce with %s: stored (200), the recipient suppressed with a reason PostgreSQL took',
    async (_case, spoil, reason) => {
      const postmarkId = randomUUID();
      const { post, sendMail, outbox, admin } = await start(postmarkId);
      const mail = await sendMail('gone@example.org');
      const response = await post('postmark', spoil(bounce('31', postmarkId, 'gone@example.org')), authorized);
      expect(response.status).toBe(200);
      expect((await outbox.get(mail.id)).feedback).toEqual([
        expect.objectContaining({ kind: 'bounced', bounceType: 'hard', recipient: 'gone@example.org' }),
      ]);
      expect(await admin.listSuppressions()).toEqual([
        expect.objectContaining({ address: 'gone@example.org', source: 'bounce', outboxId: mail.id, reason }),
      ]);
    },
  );

  it.each([
    ['a year past 9999', '+200000-01-01T00:00:00Z'],
    ['a year before 1', '-000001-01-01T00:00:00Z'],
  ])('a hard bounce dated %s: 400 with the reason, nothing written', async (_case, date) => {
    const postmarkId = randomUUID();
    const { post, sendMail, admin } = await start(postmarkId);
    await sendMail('gone@example.org');
    const body = bounce('32', postmarkId, 'gone@example.org').replace('2026-12-03T10:00:00.1234567Z', date);
    const response = await post('postmark', body, authorized);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toBe(
      'Malformed feedback: BouncedAt must be a date within the years 1 to 9999',
    );
    expect(await feedbackRows(bed)).toEqual([]);
    expect(await admin.listSuppressions()).toEqual([]);
  });

  it('a bounce whose ID is 10,000 digits long is stored under a key PostgreSQL can index, once', async () => {
    const postmarkId = randomUUID();
    const { post, sendMail, outbox } = await start(postmarkId);
    const mail = await sendMail('gone@example.org');
    const body = bounce('9'.repeat(10_000), postmarkId, 'gone@example.org');
    expect(await (await post('postmark', body, authorized)).json()).toMatchObject({ stored: 1 });
    expect(await (await post('postmark', body, authorized)).json()).toMatchObject({ stored: 0, duplicates: 1 });
    expect((await outbox.get(mail.id)).feedback.map((entry) => entry.providerEventId)).toEqual([
      expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    ]);
  });

  it('records that are not delivery feedback are acknowledged and ignored', async () => {
    const { post } = await start(randomUUID());
    const open = JSON.stringify({ RecordType: 'Open', MessageID: randomUUID(), Recipient: 'ann@example.org' });
    expect(await (await post('postmark', open, authorized)).json()).toMatchObject({
      ignored: 'Postmark Open records carry no delivery feedback',
    });
    expect(
      await (await post('postmark', bounce('7', randomUUID(), 'ann@example.org', 'AutoResponder'), authorized)).json(),
    ).toMatchObject({ ignored: 'Postmark AutoResponder bounces are not delivery feedback' });
    expect(await feedbackRows(bed)).toEqual([]);
  });

  it.each([
    ['a wrong password', { authorization: `Basic ${Buffer.from('postmark:guess').toString('base64')}` }],
    ['no credentials', { authorization: '' }],
    ['no secret header', { 'x-webhook-secret': '' }],
  ])('%s: 401 and nothing written', async (_case, change) => {
    const { post, admin } = await start(randomUUID());
    const headers = Object.fromEntries(
      Object.entries({ ...authorized, ...change }).filter(([, value]) => value !== ''),
    );
    expect((await post('postmark', bounce('1', randomUUID(), 'gone@example.org'), headers)).status).toBe(401);
    expect(await feedbackRows(bed)).toEqual([]);
    expect(await admin.listSuppressions()).toEqual([]);
  });

  it.each([
    [
      'a bounce without Email',
      bounce('1', 'm', 'gone@example.org').replace('"Email":"gone@example.org",', ''),
      'Email must be a string',
    ],
    ['a bounce without ID', bounce('1', 'm', 'gone@example.org').replace('"ID":1,', ''), 'ID must be a string'],
    ['a record that is an array', '[]', 'the Postmark record must be an object'],
  ])('%s: 400 with the reason', async (_case, body, reason) => {
    const { post } = await start(randomUUID());
    const response = await post('postmark', body, authorized);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toBe(`Malformed feedback: ${reason}`);
    expect(await feedbackRows(bed)).toEqual([]);
  });
});
