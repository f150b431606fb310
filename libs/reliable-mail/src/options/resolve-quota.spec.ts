import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError } from '../errors.js';
import type { MailTransport, ProviderSendQuota } from '../transport/mail-transport.interface.js';
import type { LaneOptions, ReliableMailOptions } from './reliable-mail-options.interface.js';
import { resolveOptions } from './resolve-options.js';

/** A provider transport that reports its account's limits, as SesMailTransport does. */
const reportingTransport = (): MailTransport => ({
  send: async () => ({ kind: 'outage', replyCode: null, enhancedStatus: null, reply: 'not used' }),
  verify: async () => undefined,
  close: async () => undefined,
  sendQuota: async (): Promise<ProviderSendQuota> => ({ perSecond: 14, perDay: 50_000 }),
});

const withLanes = (lanes: Record<string, LaneOptions>, transport: ReliableMailOptions['transport']) =>
  ({
    transport,
    from: 'noreply@example.com',
    messageIdDomain: 'mail.example.com',
    lanes,
    defaultLane: Object.keys(lanes)[0],
  }) satisfies ReliableMailOptions;

const quotas = (
  lanes: Record<string, LaneOptions>,
  transport: ReliableMailOptions['transport'] = reportingTransport(),
) =>
  Object.fromEntries(
    resolveOptions(withLanes(lanes, transport), 'host', 1).lanes.map((lane) => [lane.name, lane.quota]),
  );

function refusal(lanes: Record<string, unknown>, transport: ReliableMailOptions['transport']): InvalidOptionsError {
  try {
    resolveOptions(withLanes(lanes as Record<string, LaneOptions>, transport), 'host', 1);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionsError);
    return error as InvalidOptionsError;
  }
  throw new Error('the options were taken');
}

describe("a lane's quota", () => {
  it.each<{ name: string; lanes: Record<string, LaneOptions>; quotas: Record<string, unknown> }>([
    { name: 'none by default', lanes: { bulk: {} }, quotas: { bulk: null } },
    {
      name: 'a rate alone, kept under the lane’s name',
      lanes: { bulk: { quota: { perSecond: 20 } } },
      quotas: { bulk: { key: 'bulk', perSecond: 20, perDay: null, counts: 'messages' } },
    },
    {
      name: "'provider': both limits from the transport (SES's), counting recipients as SES does",
      lanes: { bulk: { quota: 'provider' } },
      quotas: { bulk: { key: 'bulk', perSecond: 'provider', perDay: 'provider', counts: 'recipients' } },
    },
    {
      name: 'one limit from the provider, one given, under a key two lanes share',
      lanes: {
        login: { quota: { perSecond: 'provider', perDay: 5_000, key: 'ses-eu', counts: 'recipients' } },
        news: { quota: { perSecond: 'provider', perDay: 5_000, key: 'ses-eu', counts: 'recipients' } },
      },
      quotas: {
        login: { key: 'ses-eu', perSecond: 'provider', perDay: 5_000, counts: 'recipients' },
        news: { key: 'ses-eu', perSecond: 'provider', perDay: 5_000, counts: 'recipients' },
      },
    },
    {
      name: 'a limit read from the provider (SES) counts recipients; given, it counts messages unless told',
      lanes: {
        bulk: { quota: { perSecond: 'provider', perDay: 1_000 } },
        news: { quota: { perSecond: 14 } },
        login: { quota: { perSecond: 14, key: 'ses', counts: 'recipients' } },
      },
      quotas: {
        bulk: { key: 'bulk', perSecond: 'provider', perDay: 1_000, counts: 'recipients' },
        news: { key: 'news', perSecond: 14, perDay: null, counts: 'messages' },
        login: { key: 'ses', perSecond: 14, perDay: null, counts: 'recipients' },
      },
    },
    {
      name: 'no limit: only the provider’s pauses are shared',
      lanes: { bulk: { quota: {} } },
      quotas: { bulk: { key: 'bulk', perSecond: null, perDay: null, counts: 'messages' } },
    },
    {
      name: 'a fraction of a send a second',
      lanes: { bulk: { quota: { perSecond: 0.5, perDay: 200 } } },
      quotas: { bulk: { key: 'bulk', perSecond: 0.5, perDay: 200, counts: 'messages' } },
    },
  ])('$name', ({ lanes, quotas: expected }) => {
    expect(quotas(lanes)).toEqual(expected);
  });

  it.each<{ name: string; lanes: Record<string, unknown>; option: string; transport?: 'smtp' | 'silent' }>([
    { name: 'a string other than provider', lanes: { bulk: { quota: 'ses' } }, option: 'lanes.bulk.quota' },
    { name: 'an array', lanes: { bulk: { quota: [20] } }, option: 'lanes.bulk.quota' },
    { name: 'null', lanes: { bulk: { quota: null } }, option: 'lanes.bulk.quota' },
    { name: 'a misspelt limit', lanes: { bulk: { quota: { perSec: 20 } } }, option: 'lanes.bulk.quota.perSec' },
    { name: 'a rate of 0', lanes: { bulk: { quota: { perSecond: 0 } } }, option: 'lanes.bulk.quota.perSecond' },
    {
      name: 'an infinite rate (no rate is no perSecond)',
      lanes: { bulk: { quota: { perSecond: Infinity } } },
      option: 'lanes.bulk.quota.perSecond',
    },
    { name: 'a rate as text', lanes: { bulk: { quota: { perSecond: '20' } } }, option: 'lanes.bulk.quota.perSecond' },
    {
      name: 'a rate of two million a second',
      lanes: { bulk: { quota: { perSecond: 2e6 } } },
      option: 'lanes.bulk.quota.perSecond',
    },
    { name: 'half a send a day', lanes: { bulk: { quota: { perDay: 0.5 } } }, option: 'lanes.bulk.quota.perDay' },
    { name: 'no send a day', lanes: { bulk: { quota: { perDay: 0 } } }, option: 'lanes.bulk.quota.perDay' },
    { name: 'an empty key', lanes: { bulk: { quota: { perDay: 10, key: '' } } }, option: 'lanes.bulk.quota.key' },
    {
      name: 'a key of 201 characters',
      lanes: { bulk: { quota: { key: 'k'.repeat(201) } } },
      option: 'lanes.bulk.quota.key',
    },
    { name: 'a key as a number', lanes: { bulk: { quota: { key: 42 } } }, option: 'lanes.bulk.quota.key' },
    {
      name: 'a count of something else',
      lanes: { bulk: { quota: { perDay: 10, counts: 'requests' } } },
      option: 'lanes.bulk.quota.counts',
    },
    {
      name: 'two lanes under one key counting differently (the second is named)',
      lanes: {
        login: { quota: { perSecond: 10, key: 'ses', counts: 'recipients' } },
        news: { quota: { perSecond: 10, key: 'ses' } },
      },
      option: 'lanes.news.quota',
    },
    {
      name: "'provider' on SMTP, which reports no quota",
      lanes: { bulk: { quota: 'provider' } },
      option: 'lanes.bulk.quota',
      transport: 'smtp',
    },
    {
      name: 'a limit from the provider on a transport object without sendQuota',
      lanes: { bulk: { quota: { perDay: 'provider' } } },
      option: 'lanes.bulk.quota',
      transport: 'silent',
    },
    {
      name: 'two lanes under one key with different limits (the second is named)',
      lanes: { login: { quota: { perSecond: 10, key: 'ses' } }, news: { quota: { perSecond: 20, key: 'ses' } } },
      option: 'lanes.news.quota',
    },
  ])('refused: $name', ({ lanes, option, transport }) => {
    const { sendQuota: _sendQuota, ...silent } = reportingTransport();
    const given =
      transport === 'smtp' ? 'smtp://smtp.example.com' : transport === 'silent' ? silent : reportingTransport();
    const error = refusal(lanes, given);
    expect(error.option).toBe(option);
    expect(error.message).toContain(`"${option}"`);
  });

  it('the refusals say what to do', () => {
    expect(refusal({ bulk: { quota: 'provider' } }, 'smtp://smtp.example.com').reason).toMatch(
      /reports none .* give perSecond and perDay as numbers/,
    );
    expect(
      refusal(
        { login: { quota: { perSecond: 10, key: 'ses' } }, news: { quota: { perSecond: 20, key: 'ses' } } },
        reportingTransport(),
      ).reason,
    ).toBe(
      'shares the key "ses" with lane login, and so its limits, but gives others: perSecond 20, perDay null, ' +
        'counts "messages" here, perSecond 10, perDay null, counts "messages" in login',
    );
  });
});
