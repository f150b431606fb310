import { InvalidOptionsError } from '../errors.js';
import { RELAYABLE_EVENTS } from '../reliable-mail.constants.js';
import type { RelayDestination } from '../relay/relay-destination.interface.js';
import type { RelayOptions } from './reliable-mail-options.interface.js';
import { LARGEST_OPTION, requirePositiveInteger, requireSpan } from './require.js';
import { withDefaults } from './with-defaults.js';

/** What a destination's name may be: it is a key in the relay table, a metric label and a CLI argument. */
const DESTINATION_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/i;

/** The largest batch: the claim's ids travel as one array, and each event is one publication in flight. */
const MAX_BATCH_SIZE = 10_000;

export interface ResolvedRelayDestination {
  destination: RelayDestination;
  /** The names of the events it takes, each one of `RELAYABLE_EVENTS`. */
  events: string[];
}

export interface ResolvedRelay extends Required<Omit<RelayOptions, 'destinations'>> {
  destinations: ResolvedRelayDestination[];
}

const DEFAULT_RELAY_OPTIONS: Required<Omit<RelayOptions, 'destinations'>> = {
  pollIntervalMs: 1_000,
  batchSize: 100,
  publishTimeoutMs: 10_000,
  maxBacklogAgeMs: 600_000,
};

/** The relay's options, defaults applied and each checked; null when no destination is given. */
export function resolveRelay(options: RelayOptions | undefined): ResolvedRelay | null {
  if (options === undefined || options === null) return null;
  const { destinations, ...rest } = options;
  if (!Array.isArray(destinations) || destinations.length === 0) {
    throw new InvalidOptionsError('relay.destinations', 'must list at least one destination (or leave relay out)');
  }
  const settings = withDefaults(DEFAULT_RELAY_OPTIONS, rest);
  requirePositiveInteger('relay.pollIntervalMs', settings.pollIntervalMs, 1, LARGEST_OPTION);
  requirePositiveInteger('relay.batchSize', settings.batchSize, 1, MAX_BATCH_SIZE);
  requirePositiveInteger('relay.publishTimeoutMs', settings.publishTimeoutMs);
  requireSpan('relay.maxBacklogAgeMs', settings.maxBacklogAgeMs);
  const names = new Set<string>();
  const resolved = destinations.map((destination, index) => {
    const option = `relay.destinations[${index}]`;
    if (
      typeof destination !== 'object' ||
      destination === null ||
      !['open', 'publish', 'close'].every((method) => typeof (destination as never)[method] === 'function')
    ) {
      throw new InvalidOptionsError(option, 'must be a RelayDestination (open, publish and close)');
    }
    if (typeof destination.name !== 'string' || !DESTINATION_NAME.test(destination.name)) {
      throw new InvalidOptionsError(
        `${option}.name`,
        `must be 1 to 63 letters, digits, '.', '_' or '-', got ${JSON.stringify(destination.name)}`,
      );
    }
    if (names.has(destination.name)) {
      throw new InvalidOptionsError(`${option}.name`, `names a second destination ${JSON.stringify(destination.name)}`);
    }
    names.add(destination.name);
    return { destination, events: eventsOf(option, destination.events) };
  });
  return { ...settings, destinations: resolved };
}

function eventsOf(option: string, events: unknown): string[] {
  if (events === undefined) return [...RELAYABLE_EVENTS];
  if (
    !Array.isArray(events) ||
    events.length === 0 ||
    !events.every((name: unknown) => typeof name === 'string' && RELAYABLE_EVENTS.includes(name))
  ) {
    throw new InvalidOptionsError(
      `${option}.events`,
      `must list some of ${RELAYABLE_EVENTS.join(', ')}, got ${JSON.stringify(events)}`,
    );
  }
  return [...new Set(events as string[])];
}
