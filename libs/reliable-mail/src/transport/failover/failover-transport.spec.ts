import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { InvalidOptionsError } from '../../errors.js';
import type { MailTransport, OutboundMessage, RecipientOutcome, SendOutcome } from '../mail-transport.interface.js';
import { failedBeforeHandoff } from './failed-before-handoff.js';
import { FailoverTransport } from './failover-transport.js';

type Attempted = Extract<SendOutcome, { kind: 'attempted' }>;

const RECIPIENTS = ['ann@example.com', 'bob@example.com'];
const everyRecipient = (
  status: RecipientOutcome['status'],
  replyCode: number | null,
  enhancedStatus: string | null = null,
  extra: Partial<Attempted> = {},
): Attempted => ({
  kind: 'attempted',
  recipients: RECIPIENTS.map((address) => ({
    address,
    status,
    replyCode,
    enhancedStatus,
    reply: `${replyCode ?? 'no answer'}`,
    perRecipient: false,
  })),
  reply: status === 'accepted' ? '250 ok' : null,
  providerMessageId: null,
  slowDown: false,
  ...extra,
});
const outage: SendOutcome = { kind: 'outage', replyCode: null, enhancedStatus: null, reply: 'connect ECONNREFUSED' };

describe('failedBeforeHandoff', () => {
  it.each<{ name: string; outcome: SendOutcome; expected: boolean }>([
    { name: 'an outage (no connection, a refused login, a suspended account)', outcome: outage, expected: true },
    {
      name: 'every recipient deferred with no answer (the request never reached the provider)',
      outcome: everyRecipient('deferred', null),
      expected: true,
    },
    { name: "a provider's 503 (unavailable: not taken in)", outcome: everyRecipient('deferred', 503), expected: true },
    ...[500, 502, 504].map((status) => ({
      name: `a provider's ${status} (unknown: it may have stored the message)`,
      outcome: everyRecipient('unknown', status),
      expected: false,
    })),
    // Only a 503 moves a deferral with an answer: another status (Resend's 409 while the key's first request is
    // still in progress, or any a transport defers with) says nothing of whether the provider took it in.
    ...[500, 409].map((status) => ({
      name: `every recipient deferred with a ${status}`,
      outcome: everyRecipient('deferred', status),
      expected: false,
    })),
    { name: 'an unknown outcome (written, no answer)', outcome: everyRecipient('unknown', null), expected: false },
    { name: 'taken', outcome: everyRecipient('accepted', 250, '2.0.0'), expected: false },
    { name: 'refused (the message itself was judged)', outcome: everyRecipient('refused', 422), expected: false },
    {
      name: "an SMTP server's 4yz to every recipient",
      outcome: everyRecipient('deferred', 451, '4.7.1'),
      expected: false,
    },
    {
      name: 'an SMTP 5yz the server calls transient (5.2.2, mailbox full)',
      outcome: everyRecipient('deferred', 552, '5.2.2'),
      expected: false,
    },
    {
      name: 'a request to slow down (429)',
      outcome: everyRecipient('deferred', 429, null, { slowDown: true }),
      expected: false,
    },
    {
      name: 'a send held back by a Retry-After',
      outcome: everyRecipient('deferred', null, null, { heldBack: true }),
      expected: false,
    },
    {
      name: 'one recipient taken, the other deferred with no answer',
      outcome: {
        ...everyRecipient('deferred', null),
        recipients: [
          {
            address: RECIPIENTS[0],
            status: 'accepted',
            replyCode: 250,
            enhancedStatus: null,
            reply: '250',
            perRecipient: false,
          },
          {
            address: RECIPIENTS[1],
            status: 'deferred',
            replyCode: null,
            enhancedStatus: null,
            reply: 'x',
            perRecipient: false,
          },
        ],
      },
      expected: false,
    },
    { name: 'nobody to send to', outcome: { ...everyRecipient('deferred', null), recipients: [] }, expected: false },
  ])('$name: $expected', ({ outcome, expected }) => {
    expect(failedBeforeHandoff(outcome)).toBe(expected);
  });
});

/** A transport answering each send with the next of `answers` (the last one again once they run out). */
function scripted(...answers: SendOutcome[]) {
  const sent: string[] = [];
  const transport: MailTransport = {
    send: async (message) => {
      sent.push(message.messageId);
      return answers.length > 1 ? answers.shift()! : answers[0];
    },
    verify: async () => undefined,
    close: async () => undefined,
  };
  return { transport, sent };
}

const message = (id: number): OutboundMessage => ({
  messageId: `<${id}@example.com>`,
  idempotencyKey: String(id),
  lane: 'default',
  mail: {} as OutboundMessage['mail'],
  recipients: RECIPIENTS,
});
const never = new AbortController().signal;
const taken = everyRecipient('accepted', 200);

describe('FailoverTransport', () => {
  it('sends through the first transport while it takes mail', async () => {
    const ses = scripted(taken);
    const postmark = scripted(taken);
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses.transport },
      { name: 'postmark', transport: postmark.transport },
    ]);
    expect(await failover.send(message(1), never)).toMatchObject({ kind: 'attempted', transport: 'ses' });
    expect(postmark.sent).toEqual([]);
  });

  it('moves a mail to the next transport when the first failed before handoff, and stays there until a probe', async () => {
    let now = 1_000;
    const clock = () => now;
    const ses = scripted(outage, outage, taken);
    const postmark = scripted(taken);
    const failover = new FailoverTransport(
      [
        { name: 'ses', transport: ses.transport },
        { name: 'postmark', transport: postmark.transport },
      ],
      { probeAfterMs: 60_000 },
      clock,
    );
    expect(await failover.send(message(1), never)).toMatchObject({ transport: 'postmark' });
    expect(await failover.send(message(2), never)).toMatchObject({ transport: 'postmark' });
    expect(ses.sent).toEqual(['<1@example.com>']);
    now += 60_000;
    // The probe fails: that mail goes through Postmark too, and the next probe waits another minute.
    expect(await failover.send(message(3), never)).toMatchObject({ transport: 'postmark' });
    now += 59_999;
    expect(await failover.send(message(4), never)).toMatchObject({ transport: 'postmark' });
    now += 1;
    expect(await failover.send(message(5), never)).toMatchObject({ transport: 'ses' });
    expect(await failover.send(message(6), never)).toMatchObject({ transport: 'ses' });
    expect(ses.sent).toEqual(['<1@example.com>', '<3@example.com>', '<5@example.com>', '<6@example.com>']);
    expect(postmark.sent).toEqual(['<1@example.com>', '<2@example.com>', '<3@example.com>', '<4@example.com>']);
  });

  it('logs the move with the reply cut and without the addresses it names, before the dispatcher reads the outcome', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const reply = `554 <ann@example.com> refused ${'padding '.repeat(1_000)}`;
      const ses = scripted({ ...outage, reply });
      const failover = new FailoverTransport([
        { name: 'ses', transport: ses.transport },
        { name: 'postmark', transport: scripted(taken).transport },
      ]);
      await failover.send(message(1), never);
      const [line] = warn.mock.calls.map(([logged]) => logged as { msg: string; reply: string });
      expect(line.msg).toBe('lane fails over to its next transport');
      expect(line.reply.startsWith('554 <[address]> refused padding')).toBe(true);
      expect(line.reply.length).toBeLessThanOrEqual(2_000);
    } finally {
      warn.mockRestore();
    }
  });

  it('never moves a mail whose outcome is unknown: it is retried on the same transport', async () => {
    const ses = scripted(everyRecipient('unknown', null));
    const postmark = scripted(taken);
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses.transport },
      { name: 'postmark', transport: postmark.transport },
    ]);
    expect(await failover.send(message(1), never)).toMatchObject({
      transport: 'ses',
      recipients: [{ status: 'unknown' }, { status: 'unknown' }],
    });
    expect(postmark.sent).toEqual([]);
  });

  it('the retry of a mail an earlier attempt may have handed over goes through that transport alone', async () => {
    const ses = scripted(outage, taken);
    const postmark = scripted(taken);
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses.transport },
      { name: 'postmark', transport: postmark.transport },
    ]);
    // Another mail finds SES refusing connections: the lane is on Postmark now.
    expect(await failover.send(message(1), never)).toMatchObject({ transport: 'postmark' });
    const retry = { ...message(2), possiblyTakenBefore: RECIPIENTS, possiblyTakenThrough: 'ses' };
    expect(await failover.send(retry, never)).toMatchObject({
      transport: 'ses',
      recipients: [{ status: 'accepted' }, { status: 'accepted' }],
    });
    expect(postmark.sent).toEqual(['<1@example.com>']);
  });

  it('such a retry never moves on within its attempt, whatever the transport answers; with none recorded, through the one the lane is on', async () => {
    const ses = scripted(outage);
    const postmark = scripted(taken);
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses.transport },
      { name: 'postmark', transport: postmark.transport },
    ]);
    const retry = { ...message(1), possiblyTakenBefore: RECIPIENTS, possiblyTakenThrough: 'ses' };
    expect(await failover.send(retry, never)).toMatchObject({ kind: 'outage', transport: 'ses' });
    // A worker died mid-send: its attempt recorded no transport.
    expect(await failover.send({ ...message(2), possiblyTakenBefore: RECIPIENTS }, never)).toMatchObject({
      kind: 'outage',
      transport: 'ses',
    });
    expect(postmark.sent).toEqual([]);
  });

  it('a probe whose outcome is unknown does not bring the lane back to the first transport', async () => {
    let now = 0;
    const ses = scripted(outage, everyRecipient('unknown', null), taken);
    const postmark = scripted(taken);
    const failover = new FailoverTransport(
      [
        { name: 'ses', transport: ses.transport },
        { name: 'postmark', transport: postmark.transport },
      ],
      { probeAfterMs: 1_000 },
      () => now,
    );
    expect(await failover.send(message(1), never)).toMatchObject({ transport: 'postmark' });
    now += 1_000;
    expect(await failover.send(message(2), never)).toMatchObject({
      transport: 'ses',
      recipients: [{ status: 'unknown' }, { status: 'unknown' }],
    });
    expect(await failover.send(message(3), never)).toMatchObject({ transport: 'postmark' });
  });

  it('the last transport failing too reports its own outcome', async () => {
    const failover = new FailoverTransport([
      { name: 'ses', transport: scripted(outage).transport },
      { name: 'postmark', transport: scripted(everyRecipient('deferred', 503)).transport },
    ]);
    expect(await failover.send(message(1), never)).toMatchObject({
      transport: 'postmark',
      recipients: [{ replyCode: 503 }, { replyCode: 503 }],
    });
  });

  it('makes no second request once the send deadline passed', async () => {
    const postmark = scripted(taken);
    const deadline = new AbortController();
    const ses: MailTransport = {
      ...scripted(outage).transport,
      send: async () => {
        deadline.abort();
        return everyRecipient('deferred', null);
      },
    };
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses },
      { name: 'postmark', transport: postmark.transport },
    ]);
    expect(await failover.send(message(1), deadline.signal)).toMatchObject({ transport: 'ses' });
    expect(postmark.sent).toEqual([]);
  });

  it('makes no second request once the app began to shut down', async () => {
    const postmark = scripted(taken);
    const stopping = new AbortController();
    const ses: MailTransport = {
      ...scripted(outage).transport,
      send: async () => {
        stopping.abort();
        return outage;
      },
    };
    const failover = new FailoverTransport([
      { name: 'ses', transport: ses },
      { name: 'postmark', transport: postmark.transport },
    ]);
    expect(await failover.send({ ...message(1), stopping: stopping.signal }, never)).toMatchObject({
      transport: 'ses',
    });
    expect(postmark.sent).toEqual([]);
  });

  it.each([
    { name: 'one transport', entries: [{ name: 'ses', transport: scripted(taken).transport }] },
    {
      name: 'a name twice',
      entries: [
        { name: 'ses', transport: scripted(taken).transport },
        { name: 'ses', transport: scripted(taken).transport },
      ],
    },
    {
      name: 'a name with a space',
      entries: [
        { name: 'my ses', transport: scripted(taken).transport },
        { name: 'postmark', transport: scripted(taken).transport },
      ],
    },
    {
      name: 'something that is not a transport',
      entries: [
        { name: 'ses', transport: scripted(taken).transport },
        { name: 'postmark', transport: {} as MailTransport },
      ],
    },
  ])('refuses $name', ({ entries }) => {
    expect(() => new FailoverTransport(entries)).toThrow(InvalidOptionsError);
  });
});
