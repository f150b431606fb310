import { describe, expect, it } from '@jest/globals';
import { verpAddress } from '../libs/reliable-mail/src/shared/verp.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const secret = 'a-VERP-secret-of-at-least-32-characters';
const verp = { domain: 'bounces.example.com', secret };
/** The address the module makes for a recipient of a row, as the options resolve it. */
const addressOf = (rowId: string, recipient: string) =>
  verpAddress({ ...verp, localPart: 'bounces', secrets: [secret] }, rowId, recipient);

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
