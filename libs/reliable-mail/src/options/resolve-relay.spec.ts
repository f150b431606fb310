import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { InvalidOptionsError } from '../errors.js';
import { EMAIL_BOUNCED_EVENT, RELAYABLE_EVENTS } from '../reliable-mail.constants.js';
import type { RelayDestination } from '../relay/relay-destination.interface.js';
import { resolveRelay } from './resolve-relay.js';

const destination = (name: unknown, events?: unknown): RelayDestination =>
  ({
    name,
    events,
    open: async () => undefined,
    publish: async () => undefined,
    close: async () => undefined,
  }) as unknown as RelayDestination;

describe('resolveRelay', () => {
  it('is null without destinations, and takes every event by default', () => {
    expect(resolveRelay(undefined)).toBeNull();
    const nats = destination('nats');
    expect(resolveRelay({ destinations: [nats] })).toEqual({
      destinations: [{ destination: nats, events: RELAYABLE_EVENTS }],
      pollIntervalMs: 1_000,
      batchSize: 100,
      publishTimeoutMs: 10_000,
      maxBacklogAgeMs: 600_000,
    });
  });

  it('keeps the events a destination names, once each', () => {
    const bounces = destination('bounces', [EMAIL_BOUNCED_EVENT, EMAIL_BOUNCED_EVENT]);
    expect(resolveRelay({ destinations: [bounces] })!.destinations[0].events).toEqual([EMAIL_BOUNCED_EVENT]);
  });

  it.each([
    ['no destination', { destinations: [] }, 'relay.destinations'],
    ['an object that cannot publish', { destinations: [{ name: 'x' }] }, 'relay.destinations[0]'],
    ['a name with a space', { destinations: [destination('my broker')] }, 'relay.destinations[0].name'],
    ['a name too long', { destinations: [destination('n'.repeat(64))] }, 'relay.destinations[0].name'],
    ['two of one name', { destinations: [destination('a'), destination('a')] }, 'relay.destinations[1].name'],
    ['an unknown event', { destinations: [destination('a', ['email.sent'])] }, 'relay.destinations[0].events'],
    ['no event', { destinations: [destination('a', [])] }, 'relay.destinations[0].events'],
    ['a batch of none', { destinations: [destination('a')], batchSize: 0 }, 'relay.batchSize'],
    ['a batch too large', { destinations: [destination('a')], batchSize: 10_001 }, 'relay.batchSize'],
    ['a poll interval of 0', { destinations: [destination('a')], pollIntervalMs: 0 }, 'relay.pollIntervalMs'],
    ['no publish timeout', { destinations: [destination('a')], publishTimeoutMs: -1 }, 'relay.publishTimeoutMs'],
    ['a backlog age of 1.5', { destinations: [destination('a')], maxBacklogAgeMs: 1.5 }, 'relay.maxBacklogAgeMs'],
  ])('refuses %s, naming the option', (_case, options, option) => {
    expect(() => resolveRelay(options as never)).toThrow(InvalidOptionsError);
    expect(() => resolveRelay(options as never)).toThrow(option);
  });
});

describe('resolveRelay, given anything', () => {
  it('property: relay options of any shape resolve, or are refused with an InvalidOptionsError', () => {
    const anyDestination = fc.oneof(
      fc.anything(),
      fc
        .record({ name: fc.oneof(fc.string(), fc.anything()), events: fc.anything() }, { requiredKeys: [] })
        .map((fields) => ({ ...destination(fields.name, fields.events) })),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything(),
          fc.record(
            {
              destinations: fc.oneof(fc.anything(), fc.array(anyDestination, { maxLength: 3 })),
              pollIntervalMs: fc.anything(),
              batchSize: fc.anything(),
              publishTimeoutMs: fc.anything(),
              maxBacklogAgeMs: fc.anything(),
            },
            { requiredKeys: [] },
          ),
        ),
        (options) => {
          try {
            const relay = resolveRelay(options as never);
            if (relay === null) return;
            for (const { events } of relay.destinations) {
              expect(events.length).toBeGreaterThan(0);
              expect(events.every((name) => RELAYABLE_EVENTS.includes(name))).toBe(true);
            }
            expect(Number.isInteger(relay.batchSize) && relay.batchSize >= 1).toBe(true);
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidOptionsError);
          }
        },
      ),
      propertyRuns('relay options of any shape'),
    );
  });
});
