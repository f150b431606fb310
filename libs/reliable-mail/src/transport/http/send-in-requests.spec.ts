import { describe, expect, it } from '@jest/globals';
import type { OutboundMessage, RecipientStatus, SendOutcome } from '../mail-transport.interface.js';
import { acceptedOutcome, type ProviderVerdict, outcomeOf, verdictsOn } from './provider-outcome.js';
import { RequestPacer } from './request-pacer.js';
import { requestEnvelopes, sendInRequests } from './send-in-requests.js';

const address = (name: string) => `${name}@example.com`;
const mailbox = (name: string) => ({ address: address(name) });

/** A mail to t1 (To), c1 (Cc) and b1…b4 (Bcc); with a limit of 2 its requests are [t1 c1] [b1 b2] [b3 b4]. */
function message(recipients = ['t1', 'c1', 'b1', 'b2', 'b3', 'b4']): OutboundMessage {
  return {
    messageId: '<m1@test.example.com>',
    idempotencyKey: 'row-1',
    lane: 'default',
    recipients: recipients.map(address),
    mail: {
      from: mailbox('shop'),
      to: [{ name: 'Tom', address: 'T1@example.com' }],
      cc: [mailbox('c1')],
      bcc: ['b1', 'b2', 'b3', 'b4'].map(mailbox),
      replyTo: [],
      subject: 'Hi',
      text: 'Hello',
      headers: {},
      attachments: [],
    },
  };
}

describe('requestEnvelopes: the recipients of each request', () => {
  it.each([
    {
      name: 'To and Cc first, then Bcc, each in the mail’s order',
      recipients: ['b2', 'b1', 'c1', 't1'],
      limit: 2,
      requests: [
        ['t1', 'c1'],
        ['b1', 'b2'],
      ],
    },
    {
      name: 'an attempt within the limit is one request',
      recipients: ['t1', 'c1', 'b1'],
      limit: 50,
      requests: [['t1', 'c1', 'b1']],
    },
    {
      name: 'a retry to some of them: only those',
      recipients: ['b3', 'c1', 'b4'],
      limit: 2,
      requests: [['c1', 'b3'], ['b4']],
    },
    {
      name: 'no empty request at an exact multiple',
      recipients: ['t1', 'c1', 'b1', 'b2'],
      limit: 2,
      requests: [
        ['t1', 'c1'],
        ['b1', 'b2'],
      ],
    },
    {
      name: 'a recipient the mail does not name goes last, never lost',
      recipients: ['x9', 't1'],
      limit: 1,
      requests: [['t1'], ['x9']],
    },
    {
      name: 'an API that requires a To: Bcc recipients left without To or Cc go one to a request',
      recipients: ['t1', 'c1', 'b1', 'b2', 'b3'],
      limit: 2,
      toRequired: true,
      requests: [['t1', 'c1'], ['b1'], ['b2'], ['b3']],
    },
    {
      name: 'an API that requires a To: Bcc recipients share a request with a To or Cc recipient',
      recipients: ['t1', 'c1', 'b1', 'b2', 'b3'],
      limit: 3,
      toRequired: true,
      requests: [['t1', 'c1', 'b1'], ['b2'], ['b3']],
    },
    {
      name: 'an API that requires a To: a retry to Bcc recipients only',
      recipients: ['b1', 'b2'],
      limit: 50,
      toRequired: true,
      requests: [['b1'], ['b2']],
    },
    {
      name: 'an API that requires a To: a retry to a Cc recipient shares it with Bcc recipients',
      recipients: ['c1', 'b1', 'b2'],
      limit: 50,
      toRequired: true,
      requests: [['c1', 'b1', 'b2']],
    },
  ])('$name', ({ recipients, limit, toRequired = false, requests }) => {
    expect(requestEnvelopes(message(recipients), { limit, toRequired })).toEqual(
      requests.map((names) => names.map(address)),
    );
  });
});

/** What one request of the table answers: taken, or the verdict of a refusal or of no answer. */
type Answer = 'taken' | ProviderVerdict;
const answer = verdictsOn(500, '500 internal_server_error: boom');
const throttled = verdictsOn(429, '429 rate_limit_exceeded: slow down')('deferred', { slowDown: true });
const refused = verdictsOn(422, '422 validation_error: bad')('refused');
const suspended = verdictsOn(403, '403 invalid_api_key: no')('outage');

function outcomeOfRequest(recipients: string[], reply: Answer, index: number, dedupe: boolean): SendOutcome {
  const request = { providerRequestId: `req-${index + 1}`, deduplicatedByKey: dedupe };
  if (reply !== 'taken') return outcomeOf(recipients, reply, request);
  const at = new Date(Date.UTC(2030, 0, 1, 0, 0, index));
  return acceptedOutcome(recipients, {
    ...request,
    reply: `200 id-${index + 1}`,
    providerMessageId: `id-${index + 1}`,
    acceptedAt: at,
  });
}

interface Row {
  name: string;
  answers: Answer[];
  /** The deadline passes once this many requests were made. */
  deadlineAfter?: number;
  dedupe?: boolean;
  /** How many requests went out. */
  requests: number;
  /** Each recipient's status, t1 c1 b1 b2 b3 b4; `-` marks one left untried (deferred, "not tried"). */
  statuses?: string;
  expected: Record<string, unknown>;
}

const statusOf: Record<string, RecipientStatus> = {
  A: 'accepted',
  D: 'deferred',
  U: 'unknown',
  R: 'refused',
  '-': 'deferred',
};

const rows: Row[] = [
  {
    name: 'every request taken: each recipient accepted once; the first request’s reply, ids and time',
    answers: ['taken', 'taken', 'taken'],
    requests: 3,
    statuses: 'A A A A A A',
    expected: {
      reply: '200 id-1',
      providerMessageId: 'id-1',
      providerRequestId: 'req-1',
      acceptedAt: new Date(Date.UTC(2030, 0, 1)),
      slowDown: false,
    },
  },
  {
    name: 'the second request deferred (5xx): the third is not tried, its recipients deferred',
    answers: ['taken', answer('deferred')],
    requests: 2,
    statuses: 'A A D D - -',
    expected: {
      providerMessageId: 'id-1',
      untried: 'not tried in this attempt: request 2 of 3 was not taken (deferred: 500 internal_server_error: boom)',
    },
  },
  {
    name: 'the second request without an answer (unknown): the third is not tried',
    answers: ['taken', answer('unknown')],
    requests: 2,
    statuses: 'A A U U - -',
    expected: { providerMessageId: 'id-1' },
  },
  {
    name: 'the second request throttled: the third is not tried, and the lane slows down',
    answers: ['taken', throttled],
    requests: 2,
    statuses: 'A A D D - -',
    expected: {
      slowDown: true,
      untried:
        'not tried in this attempt: request 2 of 3 was not taken (slow down: 429 rate_limit_exceeded: slow down)',
    },
  },
  {
    name: 'the first request refused for good: the others still go, as SMTP’s next transaction does',
    answers: [refused, 'taken', 'taken'],
    requests: 3,
    statuses: 'R R A A A A',
    expected: { reply: '200 id-2', providerMessageId: 'id-2', providerRequestId: 'req-2' },
  },
  {
    name: 'every request refused: nothing accepted, the last request’s id',
    answers: [refused, refused, refused],
    requests: 3,
    statuses: 'R R R R R R',
    expected: { reply: null, providerMessageId: null, providerRequestId: 'req-3', acceptedAt: null },
  },
  {
    name: 'a recipient refused by name, the others unknown (Postmark 406): the rest wait',
    answers: [answer('unknown', { refusedRecipients: [address('c1')] })],
    requests: 1,
    statuses: 'U R - - - -',
    expected: { providerMessageId: null },
  },
  {
    name: 'a recipient refused by name, the others of its request deferred (SES sandbox): the rest wait',
    answers: ['taken', answer('deferred', { refusedRecipients: [address('b2')] })],
    requests: 2,
    statuses: 'A A D R - -',
    expected: {},
  },
  {
    name: 'an outage after a request was taken: its recipients deferred with its reply, the rest not tried',
    answers: ['taken', suspended],
    requests: 2,
    statuses: 'A A D D - -',
    expected: { kind: 'attempted', providerMessageId: 'id-1', outageReply: '403 invalid_api_key: no' },
  },
  {
    name: 'an outage after a request refused for good: an attempt still, not an outage',
    answers: [refused, suspended],
    requests: 2,
    statuses: 'R R D D - -',
    expected: { kind: 'attempted', providerRequestId: 'req-2' },
  },
  {
    name: 'the send deadline passed after the first request: the rest are not tried',
    answers: ['taken', 'taken', 'taken'],
    deadlineAfter: 1,
    requests: 1,
    statuses: 'A A - - - -',
    expected: { untried: 'not tried in this attempt: the send deadline passed after request 1 of 3' },
  },
  {
    name: 'deduplicated by key when every request is (Resend)',
    answers: ['taken', answer('unknown')],
    dedupe: true,
    requests: 2,
    statuses: 'A A U U - -',
    expected: { deduplicatedByKey: true },
  },
];

describe('sendInRequests: requests of at most 2, one after another, merged into one outcome', () => {
  it.each(rows)('$name', async ({ answers, deadlineAfter, dedupe = false, requests, statuses, expected }) => {
    const deadline = new AbortController();
    const sent: string[][] = [];
    const outcome = await sendInRequests(
      message(),
      { limit: 2, toRequired: false },
      deadline.signal,
      async (recipients) => {
        const index = sent.push(recipients) - 1;
        if (sent.length === deadlineAfter) deadline.abort();
        return outcomeOfRequest(recipients, answers[index] ?? 'taken', index, dedupe);
      },
    );

    expect(sent).toEqual(
      [
        ['t1', 'c1'],
        ['b1', 'b2'],
        ['b3', 'b4'],
      ]
        .slice(0, requests)
        .map((names) => names.map(address)),
    );
    const { untried, outageReply, ...fields } = expected;
    expect(outcome).toMatchObject({ kind: 'attempted', deduplicatedByKey: false, slowDown: false, ...fields });
    if (outcome.kind !== 'attempted') return;
    // Each recipient of the attempt once, in the order of the requests.
    expect(outcome.recipients.map((recipient) => recipient.address)).toEqual(message().recipients);
    const codes = statuses!.split(' ');
    expect(outcome.recipients.map((recipient) => recipient.status)).toEqual(codes.map((code) => statusOf[code]));
    const notTried = outcome.recipients.filter((_, index) => codes[index] === '-');
    for (const recipient of notTried) {
      expect(recipient).toMatchObject({ replyCode: null, perRecipient: false });
      expect(recipient.reply).toMatch(/^not tried in this attempt: /);
      if (untried) expect(recipient.reply).toBe(untried);
    }
    if (outageReply) expect(outcome.recipients[2]).toMatchObject({ reply: outageReply, replyCode: 403 });
  });

  it('an outage of the first request is the whole send’s: nothing else is tried', async () => {
    const sent: string[][] = [];
    const outcome = await sendInRequests(
      message(),
      { limit: 2, toRequired: false },
      new AbortController().signal,
      async (recipients) => {
        sent.push(recipients);
        return outcomeOfRequest(recipients, suspended, 0, false);
      },
    );
    expect(sent).toHaveLength(1);
    expect(outcome).toEqual({
      kind: 'outage',
      replyCode: 403,
      enhancedStatus: null,
      reply: '403 invalid_api_key: no',
      providerRequestId: 'req-1',
    });
  });

  describe('paced, and stopped between requests', () => {
    /** Each request takes 100 ms and each pause what it is asked, on a clock of the test's. */
    function setup({ deadlineAt = Infinity, stopAfter = Infinity, stopAtStart = false, throwAt = 0 } = {}) {
      let now = 0;
      const deadline = new AbortController();
      const stopping = new AbortController();
      if (stopAtStart) stopping.abort();
      const pauses: number[] = [];
      const pacer = new RequestPacer(10, {
        now: () => now,
        pause: async (ms) => {
          pauses.push(ms);
          now += Math.max(ms, 0);
          if (now >= deadlineAt) deadline.abort();
        },
      });
      const starts: number[] = [];
      const run = () =>
        sendInRequests(
          { ...message(), stopping: stopping.signal },
          { limit: 2, toRequired: false, pacer },
          deadline.signal,
          async (recipients) => {
            starts.push(now);
            now += 100;
            if (starts.length === stopAfter) stopping.abort();
            if (starts.length === throwAt) throw new Error('boom');
            return outcomeOfRequest(recipients, 'taken', starts.length - 1, false);
          },
        );
      return { run, pauses, starts };
    }
    const statuses = (outcome: SendOutcome) =>
      outcome.kind === 'attempted' ? outcome.recipients.map(({ status, reply }) => `${status} ${reply}`) : [];

    it('the send deadline passing before the first slot: no request, every recipient deferred, the lane slows down', async () => {
      const { run, starts } = setup({ deadlineAt: 0 });
      const outcome = await run();
      expect(starts).toEqual([]);
      expect(outcome).toMatchObject({ slowDown: true });
      expect(new Set(statuses(outcome))).toEqual(
        new Set([
          "deferred not tried in this attempt: the send deadline passed while it waited for the provider's rate limit or Retry-After",
        ]),
      );
    });

    it('a transport that throws in the second request: its recipients deferred, the first request still taken', async () => {
      const { run, starts } = setup({ throwAt: 2 });
      const outcome = await run();
      expect(starts).toEqual([0, 110]);
      expect(statuses(outcome)).toEqual([
        'accepted 200 id-1',
        'accepted 200 id-1',
        ...Array(2).fill('deferred the transport failed: Error: boom'),
        ...Array(2).fill(
          'deferred not tried in this attempt: request 2 of 3 was not taken (deferred: the transport failed: Error: boom)',
        ),
      ]);
      expect(outcome).toMatchObject({ providerMessageId: 'id-1' });
    });

    it('each request takes its slot of the pacer: 10 a second, a tenth apart and a tenth more', async () => {
      const { run, pauses, starts } = setup();
      await run();
      expect(starts).toEqual([0, 110, 220]);
      expect(pauses).toEqual([0, 10, 10]);
    });

    it('the send deadline passing while a request waits for its slot: the rest are not tried', async () => {
      const { run, starts } = setup({ deadlineAt: 110 });
      const outcome = await run();
      expect(starts).toEqual([0]);
      expect(statuses(outcome)).toEqual([
        'accepted 200 id-1',
        'accepted 200 id-1',
        ...Array(4).fill('deferred not tried in this attempt: the send deadline passed after request 1 of 3'),
      ]);
    });

    it('the app shutting down during a request: the next is not made, and what went out is reported', async () => {
      const { run, starts } = setup({ stopAfter: 2 });
      const outcome = await run();
      expect(starts).toEqual([0, 110]);
      expect(statuses(outcome).slice(3)).toEqual([
        'accepted 200 id-2',
        ...Array(2).fill('deferred not tried in this attempt: the app shut down after request 2 of 3'),
      ]);
      expect(outcome).toMatchObject({ stoppedAtShutdown: true });
    });

    it('the app shutting down before the first request: it still waits for its slot and goes', async () => {
      const { run, starts } = setup({ stopAtStart: true });
      const outcome = await run();
      expect(starts).toEqual([0]);
      expect(outcome).toMatchObject({ stoppedAtShutdown: true });
    });
  });

  it("a Retry-After holds back the transport's requests: the attempt carries it, and the next send waits it out", async () => {
    let now = 0;
    const pacer = new RequestPacer(10, { now: () => now, pause: async (ms) => void (now += Math.max(ms, 0)) });
    const limits = { limit: 2, toRequired: false, pacer };
    const signal = new AbortController().signal;
    const starts: number[] = [];
    const first = await sendInRequests(message(), limits, signal, async (recipients) => {
      starts.push(now);
      if (starts.length === 1) return outcomeOfRequest(recipients, 'taken', 0, false);
      return outcomeOf(recipients, throttled, {
        providerRequestId: null,
        deduplicatedByKey: false,
        retryAfterMs: 3_000,
      });
    });
    expect(first).toMatchObject({ slowDown: true, retryAfterMs: 3_000 });
    await sendInRequests(message(['t1']), limits, signal, async (recipients) => {
      starts.push(now);
      return outcomeOfRequest(recipients, 'taken', 0, false);
    });
    // 110 ms apart at 10 a second; the second request's answer asked for 3 s.
    expect(starts).toEqual([0, 110, 3_110]);
  });

  describe('a Retry-After that outlasts the send’s deadline', () => {
    /** A pacer of 10 a second on a clock of the test's, the provider's answer of the first send asking for 8 s. */
    function setup() {
      let now = 0;
      const pacer = new RequestPacer(10, { now: () => now, pause: async (ms) => void (now += Math.max(ms, 0)) });
      const starts: number[] = [];
      const send = (retryAfterMs?: number) => async (recipients: string[]) => {
        starts.push(now);
        now += 100;
        if (retryAfterMs === undefined) return outcomeOfRequest(recipients, 'taken', starts.length - 1, false);
        return outcomeOf(recipients, throttled, { providerRequestId: null, deduplicatedByKey: false, retryAfterMs });
      };
      const limits = { limit: 2, toRequired: false, pacer };
      const signal = new AbortController().signal;
      return { limits, signal, send, starts, now: () => now };
    }
    const statuses = (outcome: SendOutcome) =>
      outcome.kind === 'attempted' ? outcome.recipients.map(({ status, reply }) => `${status} ${reply}`) : [];
    const why = (ms: number) =>
      `not tried in this attempt: the provider's Retry-After or rate limit allows no request before the send deadline (the next in ${ms} ms)`;

    it('before the first request: none made, answered at once, held back (not charged) for the time left', async () => {
      const { limits, signal, send, starts, now } = setup();
      await sendInRequests(message(['t1']), limits, signal, send(8_000));
      const outcome = await sendInRequests({ ...message(), deadlineAt: Date.now() + 5_000 }, limits, signal, send());
      expect(starts).toEqual([0]);
      expect(now()).toBe(100);
      expect(outcome).toMatchObject({ kind: 'attempted', heldBack: true, slowDown: true, retryAfterMs: 8_000 });
      expect(statuses(outcome)).toEqual(Array(6).fill(`deferred ${why(8_000)}`));
    });

    it('after a request was taken: what went out is reported, the rest held back (not charged)', async () => {
      const { limits, signal, starts } = setup();
      const outcome = await sendInRequests(
        { ...message(), deadlineAt: Date.now() + 5_000 },
        limits,
        signal,
        async (recipients) => {
          starts.push(0);
          // Meanwhile another send of the transport was answered with a Retry-After of 8 s.
          limits.pacer.holdFor(8_000);
          return outcomeOfRequest(recipients, 'taken', 0, false);
        },
      );
      expect(starts).toEqual([0]);
      expect(outcome).toMatchObject({ heldBack: true, retryAfterMs: 8_000, providerMessageId: 'id-1' });
      expect(statuses(outcome)).toEqual([
        'accepted 200 id-1',
        'accepted 200 id-1',
        ...Array(4).fill(`deferred ${why(8_000)}, after request 1 of 3`),
      ]);
    });

    it('with time enough before the deadline: it waits out the hold and goes', async () => {
      const { limits, signal, send, starts } = setup();
      await sendInRequests(message(['t1']), limits, signal, send(3_000));
      const outcome = await sendInRequests({ ...message(), deadlineAt: Date.now() + 5_000 }, limits, signal, send());
      expect(starts).toEqual([0, 3_100, 3_210, 3_320]);
      expect(outcome).not.toHaveProperty('heldBack');
    });
  });

  it('an attempt within the limit is one request, its outcome as it is', async () => {
    const single = outcomeOfRequest(message().recipients, answer('unknown'), 0, true);
    const outcome = await sendInRequests(
      message(),
      { limit: 50, toRequired: false },
      new AbortController().signal,
      async () => single,
    );
    expect(outcome).toBe(single);
  });
});
