import { describe, expect, it } from '@jest/globals';
import { verpAddress } from '../libs/reliable-mail/src/shared/verp.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const secret = 'a-VERP-secret-of-at-least-32-characters';
const verp = { domain: 'bounces.example.com', secret };
/** The address the module makes for a recipient of a row, as the options resolve it. */
const addressOf = (rowId: string, recipient: string) =>
  verpAddress({ ...verp, localPart: 'bounces', secrets: [secret] }, rowId, recipient);
const greylisted = { code: 451, text: '4.7.1 Greylisted, please try again later' };

describe('VERP: the envelope sender of every recipient’s copy names its row and the recipient', () => {
  const bed = useTestBed();

  it('MAIL FROM is bounces+<token>@<domain>, made for the row and the recipient; the header From stays the mail’s own', async () => {
    const { outbox, app } = await bed.start({}, { verp });
    const own = await outbox.enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'Hello' });
    const foreign = await outbox.enqueue({
      to: 'bob@example.com',
      from: 'Sales <sales@other.example.com>',
      subject: 'Hi',
      text: 'Hello',
    });
    await waitFor('both sent', () => app.events.sent.length === 2);

    const received = (messageId: string) => bed.smtp.received.find((message) => message.messageId === messageId)!;
    expect(received(own.messageId).sender).toBe(addressOf(own.id, 'ann@example.com'));
    expect(received(own.messageId).sender).toMatch(/^bounces\+[a-z2-7]{42}@bounces\.example\.com$/);
    expect(received(own.messageId).raw).toMatch(/^From: shop@example\.com$/m);
    expect(received(foreign.messageId).sender).toBe(addressOf(foreign.id, 'bob@example.com'));
    expect(received(foreign.messageId).raw).toMatch(/^From: Sales <sales@other\.example\.com>$/m);
  });

  it('a mail to several recipients goes in one transaction per recipient, each with its own return path, over one connection', async () => {
    const { outbox, app } = await bed.start({}, { verp });
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      cc: 'cid@example.com',
      bcc: 'bob@example.com',
      subject: 'Hi',
      text: 'Hello',
    });
    await waitFor('sent', () => app.events.sent.length === 1);
    expect(bed.smtp.received.map(({ messageId, sender, recipients }) => ({ messageId, sender, recipients }))).toEqual(
      ['ann@example.com', 'cid@example.com', 'bob@example.com'].map((recipient) => ({
        messageId: mail.messageId,
        sender: addressOf(mail.id, recipient),
        recipients: [recipient],
      })),
    );
    expect(new Set(bed.smtp.received.map((message) => message.sessionId)).size).toBe(1);
    expect(await outbox.get(mail.id)).toMatchObject({
      status: 'sent',
      attempts: 1,
      acceptedRecipients: ['ann@example.com', 'cid@example.com', 'bob@example.com'],
    });
  });

  it.each([
    {
      stage: 'RCPT',
      script: (defer: (address: string) => boolean) => ({
        onRcptTo: (to: string) => (defer(to) ? greylisted : undefined),
      }),
    },
    {
      stage: 'the final dot',
      script: (defer: (address: string) => boolean) => ({
        onData: ({ recipients }: { recipients: string[] }) => (defer(recipients[0]) ? greylisted : undefined),
      }),
    },
  ])(
    'the first of 3 recipients greylisted at $stage: the other two taken in the same attempt, the first at the retry, on a new connection',
    async ({ script }) => {
      const tried = new Set<string>();
      // Greylisting: the first try of each (sender, recipient) pair is put off.
      const { outbox, app } = await bed.start(
        script((address) => address === 'ann@example.com' && !tried.has(address) && !!tried.add(address)),
        { verp },
      );
      const mail = await outbox.enqueue({
        to: ['ann@example.com', 'bob@example.com', 'cid@example.com'],
        subject: 'Hi',
        text: 'x',
      });
      await waitFor('sent', () => app.events.sent.length === 1, 20_000);
      const row = await outbox.get(mail.id);
      expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['partial', 'sent']);
      expect(row.attemptLog[0].recipients!.map(({ address, status, reply }) => ({ address, status, reply }))).toEqual([
        { address: 'ann@example.com', status: 'deferred', reply: `451 ${greylisted.text}` },
        { address: 'bob@example.com', status: 'accepted', reply: expect.stringMatching(/^250/) },
        { address: 'cid@example.com', status: 'accepted', reply: expect.stringMatching(/^250/) },
      ]);
      expect(bed.smtp.copiesByRecipient(mail.messageId)).toEqual(
        new Map([
          ['bob@example.com', 1],
          ['cid@example.com', 1],
          ['ann@example.com', 1],
        ]),
      );
      // The rule stays: a connection that saw a deferral is not reused, so Ann's retry goes over a new one.
      const sessions = bed.smtp.received.map((message) => message.sessionId);
      expect(sessions[0]).toBe(sessions[1]);
      expect(sessions[2]).not.toBe(sessions[0]);
    },
  );

  it('the first of 3 recipients answered "slow down" at RCPT: the other two not tried, saying why, and all taken later', async () => {
    let throttled = false;
    const throttle = { code: 450, text: '4.7.1 Rate limit exceeded, slow down' };
    const { outbox, app } = await bed.start(
      { onRcptTo: (to) => (to === 'ann@example.com' && !throttled && (throttled = true) ? throttle : undefined) },
      { verp },
    );
    const mail = await outbox.enqueue({
      to: ['ann@example.com', 'bob@example.com', 'cid@example.com'],
      subject: 'Hi',
      text: 'x',
    });
    await waitFor('sent', () => app.events.sent.length === 1, 20_000);
    const row = await outbox.get(mail.id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['transient', 'sent']);
    const untried =
      'not tried in this attempt: the server asked to slow down (450 4.7.1 Rate limit exceeded, slow down)';
    expect(row.attemptLog[0].recipients!.map(({ address, status, reply }) => ({ address, status, reply }))).toEqual([
      { address: 'ann@example.com', status: 'deferred', reply: '450 4.7.1 Rate limit exceeded, slow down' },
      { address: 'bob@example.com', status: 'deferred', reply: untried },
      { address: 'cid@example.com', status: 'deferred', reply: untried },
    ]);
    expect(bed.smtp.copiesByMessageId().get(mail.messageId)).toBe(3);
  });

  it('a server refusing the VERP sender refuses the lane: an outage, no attempt charged, sent once it takes it', async () => {
    let refuse = true;
    const { outbox, app } = await bed.start(
      {
        onMailFrom: () =>
          refuse ? { code: 553, text: '5.7.1 Sender address rejected: not owned by user' } : undefined,
      },
      { verp },
    );
    // A sender of its own: without VERP, its refusal would fail this mail alone (see smtp-semantics).
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      from: 'sales@other.example.com',
      subject: 'Hi',
      text: 'x',
    });
    await waitFor('the outage', () => app.events.failed.some((event) => event.cause === 'outage'));
    expect(await outbox.get(mail.id)).toMatchObject({ status: 'pending', attempts: 0 });

    refuse = false;
    await waitFor('sent', () => app.events.sent.length === 1, 10_000);
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1 });
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toContain('outage');
  });

  it('the VERP sender refused after an earlier recipient’s transaction was taken: the rest deferred, never refused, and sent later', async () => {
    let refusals = 0;
    const { outbox, app, admin } = await bed.start(
      {
        onMailFrom: (sender) =>
          sender.includes('+') && refusals++ === 1
            ? { code: 550, text: '5.7.1 Sender address rejected: access denied' }
            : undefined,
      },
      { verp },
    );
    const mail = await outbox.enqueue({ to: ['ann@example.com', 'bob@example.com'], subject: 'Hi', text: 'x' });
    await waitFor('sent', () => app.events.sent.length === 1, 20_000);
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', acceptedRecipients: ['ann@example.com', 'bob@example.com'] });
    // Ann taken at the first attempt, Bob deferred (not refused: the sender is the module's), taken at the second.
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['partial', 'sent']);
    expect(bed.smtp.copiesByMessageId().get(mail.messageId)).toBe(2);
    expect(await admin.listSuppressions()).toEqual([]);
  });
});
