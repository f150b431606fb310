import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import {
  EMAIL_BOUNCED_EVENT,
  EmailBouncedEvent,
  FeedbackPayloadError,
  MailFeedbackService,
  MailOutboxAdmin,
  MailOutboxService,
} from '@reliable-mail/nestjs';
import { autoReply, dsnMessage } from './support/dsn-message.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const verp = { domain: 'bounces.example.com', secret: 'a-VERP-secret-of-at-least-32-characters' };
const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

/** Throws the first time it hears each event, so that it comes again: the second must carry the same id. */
@Injectable()
class FirstTimeThrows {
  readonly heard: EmailBouncedEvent[] = [];

  @OnEvent(EMAIL_BOUNCED_EVENT, { suppressErrors: false })
  onBounced(event: EmailBouncedEvent): void {
    this.heard.push(event);
    if (this.heard.filter((entry) => entry.eventId === event.eventId).length === 1) throw new Error('first time');
  }
}

describe('DSN emails: linked to their row by VERP address or Message-ID', () => {
  const bed = useTestBed();

  /** An app sending to the test SMTP server, one mail sent, and the message as the server received it. */
  async function sendOne(overrides = {}, to = ['gone@example.org']) {
    const started = await bed.start({}, overrides);
    const mail = await started.outbox.enqueue({ to, subject: 'Your order', text: 'Thanks' });
    await waitFor('sent', () => started.app.events.sent.length === 1);
    const received = bed.smtp.received.find((message) => message.messageId === mail.messageId)!;
    return { ...started, feedback: started.app.get(MailFeedbackService), mail, received };
  }

  const feedbackRows = () => bed.execute(`select * from mail_outbox_feedback order by recipient`);

  it('a hard bounce sent to the VERP address: linked, suppressed, EmailBouncedEvent once; a repeat stores nothing', async () => {
    const { app, outbox, admin, feedback, mail, received } = await sendOne({ verp });
    const dsn = dsnMessage({
      to: received.sender,
      messageId: '<dsn-1@mx.example.org>',
      recipients: [
        {
          address: 'gone@example.org',
          action: 'failed',
          status: '5.1.1',
          diagnostic: '550 5.1.1 <gone@example.org>: Recipient address rejected: User unknown in local recipient table',
        },
      ],
    });

    expect(await feedback.ingestDsn(dsn)).toEqual({ stored: 1, duplicates: 0, unlinked: 0, ignored: null });
    expect(await feedback.ingestDsn(Buffer.from(dsn))).toEqual({
      stored: 0,
      duplicates: 1,
      unlinked: 0,
      ignored: null,
    });

    const row = await outbox.get(mail.id);
    expect(row.feedback).toEqual([
      expect.objectContaining({
        source: 'dsn',
        recipient: 'gone@example.org',
        kind: 'bounced',
        bounceType: 'hard',
        providerEventId: `<dsn-1@mx.example.org> to ${received.sender}`,
        status: '5.1.1',
        diagnostic: expect.stringMatching(/^550 5\.1\.1 <gone@example\.org>: Recipient address rejected: User unknown/),
        reportedAt: new Date('2026-12-03T10:10:10Z'),
      }),
    ]);
    expect(row.feedback[0].payload.deliveryStatus).toContain('Final-Recipient: rfc822; gone@example.org');
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({
        address: 'gone@example.org',
        source: 'bounce',
        outboxId: mail.id,
        reason: expect.stringMatching(/^dsn hard bounce: 5\.1\.1 550 5\.1\.1/),
      }),
    ]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    await settle();
    expect(app.events.bounced).toEqual([
      expect.objectContaining({
        id: mail.id,
        messageId: mail.messageId,
        feedbackId: row.feedback[0].id,
        source: 'dsn',
        recipient: 'gone@example.org',
        bounceType: 'hard',
        status: '5.1.1',
        suppressed: true,
        authenticated: true,
        reportedAt: new Date('2026-12-03T10:10:10Z'),
      }),
    ]);
  });

  it('linked by the Message-ID in the returned headers (no VERP): a soft bounce is not suppressed; a delivery beside it', async () => {
    const { app, outbox, admin, feedback, mail, received } = await sendOne({}, [
      'gone@example.org',
      'other@example.org',
    ]);
    expect(received.sender).toBe('shop@example.com');
    const dsn = dsnMessage({
      to: received.sender,
      original: { raw: received.raw, as: 'headers' },
      recipients: [
        { address: 'gone@example.org', action: 'failed', status: '5.2.2', diagnostic: '552 5.2.2 Mailbox full' },
        { address: 'other@example.org', action: 'delivered', status: '2.0.0', diagnostic: '250 2.0.0 Ok' },
      ],
    });

    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 2, unlinked: 0 });
    const row = await outbox.get(mail.id);
    expect(
      row.feedback.map(({ recipient, kind, bounceType, status }) => ({ recipient, kind, bounceType, status })),
    ).toEqual(
      expect.arrayContaining([
        { recipient: 'gone@example.org', kind: 'bounced', bounceType: 'soft', status: '5.2.2' },
        { recipient: 'other@example.org', kind: 'delivered', bounceType: null, status: '2.0.0' },
      ]),
    );
    expect(await admin.listSuppressions()).toEqual([]);
    await waitFor('both events', () => app.events.bounced.length === 1 && app.events.delivered.length === 1);
    expect(app.events.bounced[0]).toMatchObject({
      id: mail.id,
      bounceType: 'soft',
      suppressed: false,
      authenticated: false,
    });
    expect(app.events.delivered[0]).toMatchObject({ id: mail.id, recipient: 'other@example.org' });
    expect(app.events.delivered[0]).not.toHaveProperty('suppressed');
  });

  it('a diagnostic of 500,000 characters (anyone can mail a DSN) is stored and sent in its event cut to 2,000 characters', async () => {
    const { app, outbox, feedback, mail, received } = await sendOne();
    const diagnostic = `552 5.2.2 ${'mailbox full '.repeat(40_000)}`;
    const dsn = dsnMessage({
      to: received.sender,
      original: { raw: received.raw, as: 'headers' },
      recipients: [{ address: 'gone@example.org', action: 'failed', status: '5.2.2', diagnostic }],
    });

    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 1, unlinked: 0 });
    const [stored] = (await outbox.get(mail.id)).feedback;
    // Lengths and a flag compared, not the strings: a failure would print half a million characters.
    // Cut before the word the 2,000th character falls in (`cutAtWord`), and marked so.
    expect(stored.diagnostic!.length).toBeGreaterThan(1_980);
    expect(stored.diagnostic!.length).toBeLessThanOrEqual(2_000);
    expect(stored.diagnostic!.endsWith(' …') && diagnostic.startsWith(stored.diagnostic!.slice(0, -1))).toBe(true);
    await waitFor('the bounced event', () => app.events.bounced.length === 1);
    expect(app.events.bounced[0].diagnostic === stored.diagnostic).toBe(true);
    // The recipient's group kept in the payload is cut too (the per-message group, a blank line, 3,000 characters).
    const [{ length }] = (await bed.execute(
      `select length(payload->>'deliveryStatus') as length from mail_outbox_feedback`,
    )) as Array<{ length: number }>;
    expect(length).toBeLessThanOrEqual(1_000 + 2 + 3_000);
  });

  it('the whole original returned as message/rfc822 links too', async () => {
    const { outbox, feedback, mail, received } = await sendOne();
    const dsn = dsnMessage({
      to: received.sender,
      original: { raw: received.raw, as: 'message' },
      recipients: [
        { address: 'gone@example.org', action: 'delayed', status: '4.4.1', diagnostic: 'connect timed out' },
      ],
    });
    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 1, unlinked: 0 });
    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({ kind: 'delayed', status: '4.4.1', recipient: 'gone@example.org' }),
    ]);
  });

  it('an out-of-office reply to the VERP address is not a DSN: ignored, nothing stored', async () => {
    const { feedback, mail, received } = await sendOne({ verp });
    expect(await feedback.ingestDsn(autoReply(received.sender, mail.messageId))).toEqual({
      stored: 0,
      duplicates: 0,
      unlinked: 0,
      ignored: 'not a DSN (multipart/report; report-type=delivery-status)',
    });
    expect(await feedbackRows()).toEqual([]);
  });

  it('a DSN naming a recipient its row was never sent to (anyone can send one) is stored but suppresses nobody', async () => {
    const { admin, feedback, received } = await sendOne({ verp });
    const forged = dsnMessage({
      to: received.sender,
      recipients: [{ address: 'ceo@example.com', action: 'failed', status: '5.1.1' }],
    });
    expect(await feedback.ingestDsn(forged)).toMatchObject({ stored: 1, unlinked: 0 });
    expect(await admin.listSuppressions()).toEqual([]);
  });

  /** A mail to Ann and (Bcc) Bob, sent with VERP: what each got, their return paths among it. */
  async function sendToTwo(overrides = {}) {
    const started = await bed.start({}, { verp, ...overrides });
    const mail = await started.outbox.enqueue({
      to: 'ann@example.org',
      bcc: 'bob@example.org',
      subject: 'Your order',
      text: 'Thanks',
    });
    await waitFor('sent', () => started.app.events.sent.length === 1);
    const returnPathOf = (recipient: string) =>
      bed.smtp.received.find((message) => message.recipients.includes(recipient))!.sender;
    return { ...started, feedback: started.app.get(MailFeedbackService), mail, returnPathOf };
  }

  const hardBounce = (to: string, address: string, messageId: string) =>
    dsnMessage({
      to,
      messageId,
      recipients: [{ address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }],
    });

  it('a DSN forged by one recipient of a two-recipient mail, about the other, through its own return path: stored and reported, suppresses nobody', async () => {
    const { app, outbox, admin, feedback, mail, returnPathOf } = await sendToTwo();
    // Ann knows her own return path (it is her copy's Return-Path), and Bob's address if he was in To or Cc.
    const forged = hardBounce(returnPathOf('ann@example.org'), 'bob@example.org', '<forged@attacker.example>');
    expect(await feedback.ingestDsn(forged)).toMatchObject({ stored: 1, unlinked: 0 });
    expect(await admin.listSuppressions()).toEqual([]);
    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({ recipient: 'bob@example.org', kind: 'bounced', bounceType: 'hard' }),
    ]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    expect(app.events.bounced[0]).toMatchObject({
      id: mail.id,
      recipient: 'bob@example.org',
      bounceType: 'hard',
      suppressed: false,
      authenticated: false,
    });
  });

  it.each([
    ['linked by the Message-ID alone (sent to the plain return path)', 'message-id'],
    ['linked by a VERP address of the form before tokens (a row sent before the upgrade)', 'old-verp'],
  ])('a hard bounce %s: linked, stored and reported, suppresses nobody', async (_case, link) => {
    const { app, outbox, admin, feedback, mail } = await sendToTwo();
    const raw = bed.smtp.received[0].raw;
    const dsn = dsnMessage({
      to: link === 'old-verp' ? `bounces+${mail.id}@bounces.example.com` : 'shop@example.com',
      original: link === 'message-id' ? { raw, as: 'headers' } : undefined,
      messageId: '<dsn-unauthenticated@mx.example.org>',
      recipients: [{ address: 'ann@example.org', action: 'failed', status: '5.1.1' }],
    });
    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 1, unlinked: 0 });
    expect((await outbox.get(mail.id)).feedback).toEqual([
      expect.objectContaining({ recipient: 'ann@example.org', bounceType: 'hard' }),
    ]);
    expect(await admin.listSuppressions()).toEqual([]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    expect(app.events.bounced[0]).toMatchObject({ id: mail.id, suppressed: false, authenticated: false });
  });

  it('a genuine bounce through a recipient’s own return path suppresses that recipient only', async () => {
    const { app, admin, feedback, mail, returnPathOf } = await sendToTwo();
    const genuine = hardBounce(returnPathOf('bob@example.org'), 'bob@example.org', '<dsn-bob@mx.example.org>');
    expect(await feedback.ingestDsn(genuine)).toMatchObject({ stored: 1, unlinked: 0 });
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({ address: 'bob@example.org', source: 'bounce', outboxId: mail.id }),
    ]);
    await waitFor('EmailBouncedEvent', () => app.events.bounced.length === 1);
    expect(app.events.bounced[0]).toMatchObject({
      recipient: 'bob@example.org',
      suppressed: true,
      authenticated: true,
    });
  });

  it('a DSN naming both recipients through one’s return path suppresses that one only', async () => {
    const { admin, feedback, returnPathOf } = await sendToTwo();
    const dsn = dsnMessage({
      to: returnPathOf('ann@example.org'),
      messageId: '<dsn-both@mx.example.org>',
      recipients: ['ann@example.org', 'bob@example.org'].map((address) => ({
        address,
        action: 'failed' as const,
        status: '5.1.1',
      })),
    });
    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 2 });
    expect((await admin.listSuppressions()).map((entry) => entry.address)).toEqual(['ann@example.org']);
  });

  it('a forged DSN that took a genuine one’s Message-ID first, through another return path, does not make the genuine one a repeat', async () => {
    const { admin, feedback, returnPathOf } = await sendToTwo();
    // Ann guesses the Message-ID the bounce of Bob's copy will have, and gets hers in first.
    const messageId = '<dsn-bob@mx.example.org>';
    const forged = hardBounce(returnPathOf('ann@example.org'), 'bob@example.org', messageId);
    expect(await feedback.ingestDsn(forged)).toMatchObject({ stored: 1, duplicates: 0 });
    const genuine = hardBounce(returnPathOf('bob@example.org'), 'bob@example.org', messageId);
    expect(await feedback.ingestDsn(genuine)).toMatchObject({ stored: 1, duplicates: 0 });
    // The genuine one delivered again is still a repeat.
    expect(await feedback.ingestDsn(genuine)).toMatchObject({ stored: 0, duplicates: 1 });
    expect(await admin.listSuppressions()).toEqual([expect.objectContaining({ address: 'bob@example.org' })]);
    const rows = (await feedbackRows()) as Array<{ provider_event_id: string }>;
    expect(rows.map((row) => row.provider_event_id).sort()).toEqual(
      ['ann@example.org', 'bob@example.org'].map((recipient) => `${messageId} to ${returnPathOf(recipient)}`).sort(),
    );
  });

  it('secrets rotate: mail sent under the old secret is authenticated while [old, new] is configured, not once the old one is dropped', async () => {
    const oldSecret = verp.secret;
    const newSecret = 'the-new-VERP-secret-of-32-characters-or-more';
    const sent = await sendToTwo();
    const annPath = sent.returnPathOf('ann@example.org');
    const bobPath = sent.returnPathOf('bob@example.org');
    await sent.app.close();

    const rotating = await bed.startApp(
      testMailOptions(bed.smtpUrl, { verp: { ...verp, secret: [oldSecret, newSecret] } }),
    );
    // Signed with the newest: the next mail's return path is not what the old secret makes.
    const next = await rotating.get(MailOutboxService).enqueue({ to: 'cid@example.org', subject: 'Hi', text: 'x' });
    await waitFor('the next mail', () => rotating.events.sent.length === 1);
    const cidPath = bed.smtp.received.find((message) => message.messageId === next.messageId)!.sender;
    const feedback = rotating.get(MailFeedbackService);
    await feedback.ingestDsn(hardBounce(annPath, 'ann@example.org', '<dsn-old-ann@mx.example.org>'));
    await feedback.ingestDsn(hardBounce(cidPath, 'cid@example.org', '<dsn-new-cid@mx.example.org>'));
    expect((await rotating.get(MailOutboxAdmin).listSuppressions()).map((entry) => entry.address).sort()).toEqual([
      'ann@example.org',
      'cid@example.org',
    ]);
    await rotating.close();

    const rotated = await bed.startApp(testMailOptions(bed.smtpUrl, { verp: { ...verp, secret: newSecret } }));
    await rotated
      .get(MailFeedbackService)
      .ingestDsn(hardBounce(bobPath, 'bob@example.org', '<dsn-old-bob@mx.example.org>'));
    expect((await rotated.get(MailOutboxAdmin).listSuppressions()).map((entry) => entry.address)).not.toContain(
      'bob@example.org',
    );
    await waitFor('EmailBouncedEvent', () => rotated.events.bounced.length === 1);
    expect(rotated.events.bounced[0]).toMatchObject({ recipient: 'bob@example.org', authenticated: false });
  });

  it('a DSN for no known row is stored unlinked and counted, with no event', async () => {
    const { app, admin, feedback } = await sendOne();
    const dsn = dsnMessage({
      to: 'shop@example.com',
      original: { raw: 'Message-ID: <0190f0a2-1111-7000-8000-00000000000a@test.example.com>\r\n\r\nHi', as: 'headers' },
      recipients: [{ address: 'gone@example.org', action: 'failed', status: '5.1.1' }],
    });
    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 1, unlinked: 1 });
    expect(await feedbackRows()).toEqual([expect.objectContaining({ outbox_id: null, kind: 'bounced' })]);
    expect(await admin.listSuppressions()).toEqual([]);
    await settle();
    expect(app.events.bounced).toEqual([]);
  });

  it('a feedback event whose listener threw is emitted again after its lease, with the same eventId', async () => {
    const server = await bed.startSmtp();
    const app = await bed.startApp(testMailOptions(server.url, { verp }), [FirstTimeThrows]);
    const mail = await app.get(MailOutboxService).enqueue({ to: 'gone@example.org', subject: 'Hi', text: 'x' });
    await waitFor('sent', () => app.events.sent.length === 1);
    const dsn = dsnMessage({
      to: server.received[0].sender,
      recipients: [{ address: 'gone@example.org', action: 'failed', status: '5.1.1' }],
    });
    await app.get(MailFeedbackService).ingestDsn(dsn);

    const listener = app.get(FirstTimeThrows);
    await waitFor('the redelivery', () => listener.heard.length === 2, 10_000);
    expect(listener.heard[0]).toBeInstanceOf(EmailBouncedEvent);
    expect(listener.heard[1]).toBeInstanceOf(EmailBouncedEvent);
    expect(listener.heard[1]).toMatchObject({ eventId: listener.heard[0].eventId, id: mail.id, bounceType: 'hard' });
    expect(listener.heard[1].reportedAt).toBeInstanceOf(Date);
    await waitFor(
      'the event confirmed',
      async () => (await bed.execute(`select * from mail_outbox_event`)).length === 0,
    );
  });

  it.each([
    [
      'a report without its delivery-status part',
      (dsn: string) => dsn.replace('message/delivery-status', 'text/plain'),
    ],
    ['a delivery status naming no recipient', (dsn: string) => dsn.replaceAll('Final-Recipient', 'X-Recipient')],
  ])('%s throws FeedbackPayloadError and stores nothing', async (_case, spoil) => {
    const { feedback, received } = await sendOne({ verp });
    const dsn = dsnMessage({
      to: received.sender,
      recipients: [{ address: 'gone@example.org', action: 'failed', status: '5.1.1' }],
    });
    await expect(feedback.ingestDsn(spoil(dsn))).rejects.toBeInstanceOf(FeedbackPayloadError);
    expect(await feedbackRows()).toEqual([]);
  });
});

/** A lone UTF-16 surrogate (the high half of a pair, alone), as an encoded word decodes it. */
const LONE_SURROGATE_WORD = `=?UTF-16LE?B?${Buffer.from([0x00, 0xd8]).toString('base64')}?=`;
const SUPPRESSION_PREFIX = 'dsn hard bounce: 5.1.1 ';
/** Padding that puts an emoji's high surrogate at code unit 498, where the 500-unit cut (with its `…`) falls. */
const EMOJI_PAD = 'u'.repeat(500 - SUPPRESSION_PREFIX.length - '550 5.1.1 '.length - 2);

/** The DSNs of item 3: each is a hard bounce of gone@example.org, with something PostgreSQL cannot store as it came. */
const unstorable: Array<[string, (dsn: string) => string, { reportedAt?: Date; reason?: string }]> = [
  [
    'a Subject and a From that decode to a lone surrogate',
    (dsn) =>
      dsn
        .replace('Subject: Undelivered Mail Returned to Sender', `Subject: ${LONE_SURROGATE_WORD}`)
        .replace(
          'From: MAILER-DAEMON@mx.example.org (Mail Delivery System)',
          `From: ${LONE_SURROGATE_WORD} <mailer-daemon@mx.example.org>`,
        ),
    { reportedAt: new Date('2026-12-03T10:10:10Z') },
  ],
  [
    'a diagnostic whose emoji the 500-character suppression reason cuts in half',
    (dsn) =>
      dsn.replace(
        'Diagnostic-Code: smtp; 550 5.1.1 user unknown',
        `Diagnostic-Code: smtp; 550 5.1.1 ${EMOJI_PAD}😀 unknown`,
      ),
    { reportedAt: new Date('2026-12-03T10:10:10Z'), reason: `${SUPPRESSION_PREFIX}550 5.1.1 ${EMOJI_PAD}…` },
  ],
  [
    'a Last-Attempt-Date in the year 200000 (a date to JavaScript, none to PostgreSQL)',
    (dsn) => dsn.replace(/Last-Attempt-Date: .*/, 'Last-Attempt-Date: +200000-01-01T00:00:00Z'),
    // The next date the report gives: its Arrival-Date.
    { reportedAt: new Date('2026-12-03T10:10:09Z') },
  ],
  [
    'every date of the report out of range',
    (dsn) =>
      dsn
        .replace(/Last-Attempt-Date: .*/, 'Last-Attempt-Date: +200000-01-01T00:00:00Z')
        .replace(/Arrival-Date: .*/, 'Arrival-Date: -000001-01-01T00:00:00Z')
        .replace(/^Date: .*/m, 'Date: Thu, 3 Dec 200000 10:10:10 +0000'),
    // None left: when it was read.
    {},
  ],
];

describe('DSNs PostgreSQL cannot store as they came', () => {
  const bed = useTestBed();

  async function start() {
    const { app, outbox, admin } = await bed.start({}, { verp });
    const mail = await outbox.enqueue({ to: 'gone@example.org', subject: 'Your order', text: 'Thanks' });
    await waitFor('sent', () => app.events.sent.length === 1);
    const received = bed.smtp.received.find((message) => message.messageId === mail.messageId)!;
    const dsn = (messageId: string) =>
      dsnMessage({
        to: received.sender,
        messageId,
        recipients: [
          { address: 'gone@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' },
        ],
      });
    return { app, outbox, admin, feedback: app.get(MailFeedbackService), mail, dsn, returnPath: received.sender };
  }

  it.each(unstorable)(
    '%s: stored, the recipient suppressed, nothing PostgreSQL refused',
    async (_case, spoil, expected) => {
      const { outbox, admin, feedback, mail, dsn } = await start();
      expect(await feedback.ingestDsn(spoil(dsn('<dsn-unstorable@mx.example.org>')))).toMatchObject({
        stored: 1,
        unlinked: 0,
      });
      const [stored] = (await outbox.get(mail.id)).feedback;
      expect(stored).toMatchObject({ kind: 'bounced', bounceType: 'hard', recipient: 'gone@example.org' });
      expect(JSON.stringify(stored.payload)).not.toMatch(/\\ud[89ab]/i);
      if (expected.reportedAt) expect(stored.reportedAt).toEqual(expected.reportedAt);
      else expect(Math.abs(stored.reportedAt.getTime() - Date.now())).toBeLessThan(60_000);
      const [suppression] = await admin.listSuppressions();
      expect(suppression).toMatchObject({ address: 'gone@example.org', outboxId: mail.id });
      if (expected.reason) expect(suppression.reason).toBe(expected.reason);
    },
  );

  it('an IMAP-style poll over such DSNs, and one it cannot read, quarantines what it cannot ingest and goes on to the next', async () => {
    const { admin, feedback, dsn, returnPath } = await start();
    const mailbox = [
      ...unstorable.map(([, spoil], index) => spoil(dsn(`<dsn-${index}@mx.example.org>`))),
      dsn('<dsn-unreadable@mx.example.org>').replace('message/delivery-status', 'text/plain'),
      // A Subject of 2 MB: past the 1 MiB mailparser reads of a header.
      dsn('<dsn-huge-header@mx.example.org>').replace('Subject: ', `Subject: ${'x'.repeat(2_000_000)}`),
      dsn('<dsn-last@mx.example.org>'),
    ];
    // The README's poller, over an array instead of a mailbox: each message ends stored, ignored or quarantined;
    // one the database could not take (anything but FeedbackPayloadError) would be left for the next poll.
    const outcomes: string[] = [];
    for (const message of mailbox) {
      try {
        const { stored, duplicates } = await feedback.ingestDsn(message);
        outcomes.push(stored + duplicates > 0 ? 'stored' : 'ignored');
      } catch (error) {
        outcomes.push(error instanceof FeedbackPayloadError ? 'quarantined' : `left: ${String(error)}`);
      }
    }
    expect(outcomes).toEqual([...unstorable.map(() => 'stored'), 'quarantined', 'quarantined', 'stored']);
    expect(await bed.execute(`select provider_event_id from mail_outbox_feedback order by provider_event_id`)).toEqual(
      [...unstorable.map((_, index) => `<dsn-${index}@mx.example.org>`), '<dsn-last@mx.example.org>']
        .sort()
        .map((id) => ({ provider_event_id: `${id} to ${returnPath}` })),
    );
    expect(await admin.listSuppressions()).toEqual([expect.objectContaining({ address: 'gone@example.org' })]);
  });
});

describe('DSNs of many recipients: bounded, each row with its own recipient group', () => {
  const bed = useTestBed();
  const groups = (count: number) =>
    Array.from({ length: count }, (_, index) => ({
      address: `r${index}@example.org`,
      action: 'failed' as const,
      status: '5.1.1',
      diagnostic: '550 5.1.1 user unknown',
    }));

  async function start() {
    const { app } = await bed.start();
    return app.get(MailFeedbackService);
  }

  it.each([
    [
      '12,799 recipient groups in 2.8 MB',
      groups(12_799),
      /the delivery-status part has \d+ bytes, more than the 1048576/,
    ],
    ['1,001 recipient groups', groups(1_001), /the delivery-status part has 1001 recipient groups, more than the 1000/],
  ])('a DSN of %s is refused with FeedbackPayloadError, nothing stored', async (_case, recipients, reason) => {
    const feedback = await start();
    const refusal = feedback.ingestDsn(
      dsnMessage({ to: 'shop@example.com', messageId: '<many@x.example>', recipients }),
    );
    await expect(refusal).rejects.toBeInstanceOf(FeedbackPayloadError);
    await expect(refusal).rejects.toThrow(reason);
    expect(await bed.execute(`select count(*)::int as n from mail_outbox_feedback`)).toEqual([{ n: 0 }]);
  });

  it('a message larger than 16 MiB is no DSN it reads: refused with FeedbackPayloadError', async () => {
    const feedback = await start();
    const dsn = dsnMessage({
      to: 'shop@example.com',
      recipients: groups(1),
      original: { raw: `Subject: big\r\n\r\n${'x'.repeat(16 * 1_048_576)}`, as: 'message' },
    });
    await expect(feedback.ingestDsn(dsn)).rejects.toThrow(/the message has \d+ bytes, more than the 16777216/);
  });

  it('a DSN of 1,000 recipient groups: stored, each row with the per-message group and its own group only', async () => {
    const feedback = await start();
    const dsn = dsnMessage({ to: 'shop@example.com', messageId: '<many@x.example>', recipients: groups(1_000) });
    expect(await feedback.ingestDsn(dsn)).toMatchObject({ stored: 1_000, duplicates: 0 });
    const rows = (await bed.execute(
      `select recipient, payload->>'deliveryStatus' as status, pg_column_size(payload) as size from mail_outbox_feedback`,
    )) as Array<{ recipient: string; status: string; size: number }>;
    expect(rows).toHaveLength(1_000);
    for (const { recipient, status } of rows) {
      expect(status.match(/Final-Recipient/g)).toEqual(['Final-Recipient']);
      expect(status).toContain(`Final-Recipient: rfc822; ${recipient}`);
      expect(status).toMatch(/^Reporting-MTA: dns; mx\.example\.org/);
    }
    // Each row about 500 bytes, where each carried the whole 217 KB part before.
    expect(rows.reduce((sum, row) => sum + row.size, 0)).toBeLessThan(1_000_000);
  });
});
