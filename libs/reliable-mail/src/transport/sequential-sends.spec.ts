import { describe, expect, it } from '@jest/globals';
import type { RecipientOutcome, RecipientStatus, SendOutcome } from './mail-transport.interface.js';
import { mergeSendParts, nextSendGoes, type SendPart, stopReasonOf } from './sequential-sends.js';

const ann = 'ann@example.com';
const bob = 'bob@example.com';
const cid = 'cid@example.com';
const UNTRIED = 'not tried in this attempt: copy 1 of 3 was not taken';

const REPLIES: Record<RecipientStatus, { replyCode: number | null; reply: string | null }> = {
  accepted: { replyCode: 250, reply: '250 2.0.0 queued as Q' },
  deferred: { replyCode: 451, reply: '451 4.7.1 greylisted' },
  refused: { replyCode: 550, reply: '550 5.1.1 no such user' },
  unknown: { replyCode: null, reply: null },
};

function recipient(address: string, status: RecipientStatus): RecipientOutcome {
  return { address, status, ...REPLIES[status], enhancedStatus: null, perRecipient: true };
}

/** One recipient's send, with what its provider said of it. */
function part(address: string, status: RecipientStatus, facts: Partial<SendOutcome> = {}): SendPart {
  const accepted = status === 'accepted';
  return {
    recipients: [address],
    outcome: {
      kind: 'attempted',
      recipients: [recipient(address, status)],
      reply: accepted ? REPLIES.accepted.reply : null,
      providerMessageId: accepted ? `id-${address}` : null,
      providerRequestId: `request-${address}`,
      acceptedAt: accepted ? new Date(`2026-01-0${address === ann ? 1 : 2}T00:00:00Z`) : null,
      slowDown: false,
      ...facts,
    } as SendOutcome,
  };
}

function outage(address: string, facts: Partial<Extract<SendOutcome, { kind: 'outage' }>> = {}): SendPart {
  return {
    recipients: [address],
    outcome: { kind: 'outage', replyCode: 421, enhancedStatus: null, reply: '421 4.3.2 try later', ...facts },
  };
}

const statuses = (outcome: SendOutcome) =>
  outcome.kind === 'attempted' ? outcome.recipients.map(({ address, status, reply }) => [address, status, reply]) : [];

describe('nextSendGoes and stopReasonOf: whether an attempt makes its next send, and why not', () => {
  it.each<{ name: string; sent: SendPart; goes: boolean; reason?: string }>([
    { name: 'taken', sent: part(ann, 'accepted'), goes: true },
    { name: 'refused for good', sent: part(ann, 'refused'), goes: true },
    { name: 'deferred', sent: part(ann, 'deferred'), goes: false, reason: 'deferred: 451 4.7.1 greylisted' },
    { name: 'unknown', sent: part(ann, 'unknown'), goes: false, reason: 'unknown: no reply' },
    {
      name: 'taken, with a request to slow down',
      sent: part(ann, 'accepted', { slowDown: true }),
      goes: false,
      reason: 'slow down: 250 2.0.0 queued as Q',
    },
    { name: 'an outage', sent: outage(ann), goes: false, reason: 'outage: 421 4.3.2 try later' },
  ])('$name', ({ sent, goes, reason }) => {
    expect(nextSendGoes(sent.outcome)).toBe(goes);
    if (reason) expect(stopReasonOf(sent.outcome)).toBe(reason);
  });
});

describe('mergeSendParts: the attempt’s one outcome from its sends', () => {
  it('a single send with nothing untried is its own outcome, as it is', () => {
    const only = part(ann, 'deferred', { retryAfterMs: 5_000, transport: 'ses' });
    expect(mergeSendParts([only], [], '')).toBe(only.outcome);
  });

  it('an outage of the first send is the attempt’s outage, whatever was left untried', () => {
    const first = outage(ann, { retryAfterMs: 30_000 });
    expect(mergeSendParts([first], [bob, cid], UNTRIED)).toBe(first.outcome);
  });

  it.each<{ name: string; sent: SendPart[]; untried: string[]; expected: Record<string, unknown>; each: unknown[] }>([
    {
      name: 'all taken: the first accepting send’s reply, ids and time; every send deduplicated or not',
      sent: [part(ann, 'accepted', { deduplicatedByKey: true }), part(bob, 'accepted')],
      untried: [],
      expected: {
        reply: REPLIES.accepted.reply,
        providerMessageId: `id-${ann}`,
        providerRequestId: `request-${ann}`,
        acceptedAt: new Date('2026-01-01T00:00:00Z'),
        deduplicatedByKey: false,
        slowDown: false,
      },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'accepted', REPLIES.accepted.reply],
      ],
    },
    {
      name: 'the first refused, the second taken: the reply and ids are the one that took it',
      sent: [part(ann, 'refused'), part(bob, 'accepted')],
      untried: [],
      expected: { reply: REPLIES.accepted.reply, providerMessageId: `id-${bob}`, providerRequestId: `request-${bob}` },
      each: [
        [ann, 'refused', REPLIES.refused.reply],
        [bob, 'accepted', REPLIES.accepted.reply],
      ],
    },
    {
      name: 'taken, then deferred: the rest untried, deferred with the reason given',
      sent: [part(ann, 'accepted'), part(bob, 'deferred')],
      untried: [cid],
      expected: { providerMessageId: `id-${ann}`, slowDown: false },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'deferred', REPLIES.deferred.reply],
        [cid, 'deferred', UNTRIED],
      ],
    },
    {
      name: 'taken, then an outage: its recipient deferred with the outage’s reply, the rest untried',
      sent: [part(ann, 'accepted'), outage(bob, { retryAfterMs: 30_000, transport: 'postmark' })],
      untried: [cid],
      expected: { providerMessageId: `id-${ann}`, retryAfterMs: 30_000, transport: undefined },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'deferred', '421 4.3.2 try later'],
        [cid, 'deferred', UNTRIED],
      ],
    },
    {
      name: 'none taken: no reply or id, the last send’s request id and transport',
      sent: [part(ann, 'refused', { transport: 'ses' }), part(bob, 'unknown', { transport: 'postmark' })],
      untried: [cid],
      expected: {
        reply: null,
        providerMessageId: null,
        providerRequestId: `request-${bob}`,
        acceptedAt: null,
        transport: 'postmark',
      },
      each: [
        [ann, 'refused', REPLIES.refused.reply],
        [bob, 'unknown', null],
        [cid, 'deferred', UNTRIED],
      ],
    },
    {
      name: 'the transport of the send that took it, in a lane of several',
      sent: [part(ann, 'accepted', { transport: 'ses' }), part(bob, 'accepted', { transport: 'postmark' })],
      untried: [],
      expected: { transport: 'ses' },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'accepted', REPLIES.accepted.reply],
      ],
    },
    {
      name: 'a request to slow down and the longest Retry-After carried',
      sent: [
        part(ann, 'accepted', { retryAfterMs: 1_000 }),
        part(bob, 'deferred', { slowDown: true, retryAfterMs: 9_000 }),
      ],
      untried: [cid],
      expected: { slowDown: true, retryAfterMs: 9_000 },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'deferred', REPLIES.deferred.reply],
        [cid, 'deferred', UNTRIED],
      ],
    },
    {
      name: 'a send its transport held back: the attempt is held back, not charged',
      sent: [part(ann, 'accepted'), part(bob, 'deferred', { heldBack: true, retryAfterMs: 60_000 })],
      untried: [cid],
      expected: { heldBack: true, retryAfterMs: 60_000 },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'deferred', REPLIES.deferred.reply],
        [cid, 'deferred', UNTRIED],
      ],
    },
    {
      name: 'a send stopped at shutdown: the attempt says so',
      sent: [part(ann, 'accepted'), part(bob, 'deferred', { stoppedAtShutdown: true })],
      untried: [],
      expected: { stoppedAtShutdown: true },
      each: [
        [ann, 'accepted', REPLIES.accepted.reply],
        [bob, 'deferred', REPLIES.deferred.reply],
      ],
    },
  ])('$name', ({ sent, untried, expected, each }) => {
    const merged = mergeSendParts(sent, untried, UNTRIED);
    expect(merged.kind).toBe('attempted');
    expect(statuses(merged)).toEqual(each);
    for (const [field, value] of Object.entries(expected)) {
      expect((merged as Record<string, unknown>)[field]).toEqual(value);
    }
  });

  it('says nothing it was not told: no Retry-After, hold, shutdown or transport when no send had one', () => {
    const merged = mergeSendParts([part(ann, 'accepted'), part(bob, 'accepted')], [], '');
    for (const field of ['retryAfterMs', 'heldBack', 'stoppedAtShutdown', 'transport'])
      expect(merged).not.toHaveProperty(field);
  });
});
