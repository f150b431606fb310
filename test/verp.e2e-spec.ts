import { describe, expect, it } from '@jest/globals';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const verp = { domain: 'bounces.example.com' };

describe('VERP: the envelope sender of every mail names its row', () => {
  const bed = useTestBed();

  it('MAIL FROM is bounces+<row id>@<domain>; the header From stays the mail’s own', async () => {
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
    expect(received(own.messageId).sender).toBe(`bounces+${own.id}@bounces.example.com`);
    expect(received(own.messageId).raw).toMatch(/^From: shop@example\.com$/m);
    expect(received(foreign.messageId).sender).toBe(`bounces+${foreign.id}@bounces.example.com`);
    expect(received(foreign.messageId).raw).toMatch(/^From: Sales <sales@other\.example\.com>$/m);
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
});
