import { DEFAULT_PARTITIONS_AHEAD, MIN_PARTITIONS_AHEAD } from '../schema/partitioned-layout.js';
import { CLIENT_TIMEOUT_MARGIN_MS } from '../database/statement-bound.js';
import { isPlainIdentifier } from '../schema/outbox-tables.js';
import { withDefaults } from './with-defaults.js';
import { leaseForSendAndSettleMs, SETTLE_MARGIN_MS } from '../dispatch/lease.js';
import { InvalidOptionsError } from '../errors.js';
import type { MailTemplateFolder } from '../templates/file-templates.js';
import type { MailTemplate } from '../templates/mail-template.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import type { Verp } from '../shared/verp.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { HOSTNAME_PATTERN, POSTGRES_URL, requirePositiveInteger, requireSpan } from './require.js';
import { shown } from '../shared/shown.js';
import { resolveHealth } from './resolve-health.js';
import { requireAgreeingQuotas, type ResolvedLaneQuota, resolveQuota } from './resolve-quota.js';
import {
  type LaneUnsubscribe,
  resolveLaneUnsubscribe,
  type ResolvedUnsubscribe,
  resolveUnsubscribe,
} from './resolve-unsubscribe.js';
import { resolveVerp } from './resolve-verp.js';
import { type ResolvedPooler, resolvePooler } from './resolve-pooler.js';
import { resolveRetry } from './resolve-retry.js';
import { type ResolvedRelay, resolveRelay } from './resolve-relay.js';
import { type ResolvedSmtpOptions, resolveSmtpOptions } from '../transport/smtp/smtp-transport-options.js';
import type {
  AttachmentResolver,
  DispatcherOptions,
  HealthOptions,
  LaneOptions,
  ReliableMailOptions,
  RetentionOptions,
  DatabaseOptions,
  EventOptions,
  LoggingOptions,
  TransportOption,
} from './reliable-mail-options.interface.js';

/** A lane's transport: SMTP, which reliable-mail connects per lane, or an object that sends by itself. */
export type ResolvedTransport =
  { kind: 'smtp'; options: ResolvedSmtpOptions } | { kind: 'object'; transport: MailTransport };

export interface ResolvedLane {
  name: string;
  concurrency: number;
  ratePerSecond: number | null;
  priority: number;
  transport: ResolvedTransport;
  /** The provider's limits, shared by every instance; null when the lane has none. */
  quota: ResolvedLaneQuota | null;
  /** The one-click unsubscribe of a lane marked `transactional: false`; null for a transactional lane. */
  unsubscribe: LaneUnsubscribe | null;
}

export interface ResolvedReliableMailOptions {
  transport: ResolvedTransport;
  from: string;
  messageIdDomain: string;
  dispatcher: Required<DispatcherOptions>;
  retry: RetryPolicy;
  lanes: ResolvedLane[];
  defaultLane: string;
  retention: Required<RetentionOptions>;
  health: Required<HealthOptions>;
  database: Omit<Required<DatabaseOptions>, 'url' | 'schema' | keyof ResolvedPooler> & {
    url: string | null;
    schema: string | null;
  } & ResolvedPooler;
  events: Required<EventOptions>;
  /** The brokers events are relayed to; null when none is. */
  relay: ResolvedRelay | null;
  templates: Array<MailTemplate | MailTemplateFolder>;
  maxMessageBytes: number;
  attachmentResolver: AttachmentResolver | null;
  verp: Verp | null;
  /** The one-click links' route and keys: the route reads them even once no lane is non-transactional any more. */
  unsubscribe: ResolvedUnsubscribe | null;
  requireTransaction: boolean;
  logging: Required<LoggingOptions>;
}

const DEFAULT_RETENTION_OPTIONS: Omit<Required<RetentionOptions>, 'enabled'> = {
  keepClosedForMs: 30 * 86_400_000,
  batchSize: 500,
  intervalMs: 600_000,
  partitionsAhead: DEFAULT_PARTITIONS_AHEAD,
};

const DEFAULT_DATABASE_OPTIONS: Omit<ResolvedReliableMailOptions['database'], keyof ResolvedPooler> = {
  url: null,
  schema: null,
  poolSize: 10,
  statementTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  migrateAtStart: false,
  startTimeoutMs: 60_000,
};

const DEFAULT_LANES = ['critical', 'default', 'bulk'] as const;
/** The lane login codes and password resets are meant for goes before every other unless told otherwise. */
const DEFAULT_PRIORITIES: Readonly<Record<string, number>> = { critical: 1 };
/** Any integer within these would do; bounded so that a typo (`1e9`) is caught. */
const LARGEST_PRIORITY = 1_000;
const LANE_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

const DEFAULT_DISPATCHER_OPTIONS: Omit<Required<DispatcherOptions>, 'workerId'> = {
  enabled: true,
  pollIntervalMs: 1_000,
  batchSize: 50,
  concurrency: 8,
  leaseMs: 600_000,
  sendTimeoutMs: 180_000,
  shutdownTimeoutMs: 30_000,
  eventLeaseMs: 30_000,
  heartbeatMs: 10_000,
};

const DEFAULT_EVENT_OPTIONS: Required<EventOptions> = {
  record: 'listened',
  listenerTimeoutMs: 30_000,
  concurrency: 16,
  maxQueued: 10_000,
};

const DEFAULT_LOGGING_OPTIONS: Required<LoggingOptions> = { perMail: false, summaryIntervalMs: 60_000 };

/** 5 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 5 * 1024 * 1024;

/** Applies defaults and rejects options the module cannot work with, naming the option. */
export function resolveOptions(
  options: ReliableMailOptions,
  hostname: string,
  pid: number,
): ResolvedReliableMailOptions {
  if (!options || typeof options !== 'object') {
    throw new InvalidOptionsError('options', 'must be an object');
  }
  const transport = resolveTransport(options.transport, 'transport');
  if (typeof options.from !== 'string' || !options.from.includes('@')) {
    throw new InvalidOptionsError('from', `must be an email address, got ${JSON.stringify(options.from)}`);
  }
  if (typeof options.messageIdDomain !== 'string' || !HOSTNAME_PATTERN.test(options.messageIdDomain)) {
    throw new InvalidOptionsError(
      'messageIdDomain',
      `must be a domain name such as "mail.example.com", got ${JSON.stringify(options.messageIdDomain)}`,
    );
  }

  const dispatcher = withDefaults(
    { ...DEFAULT_DISPATCHER_OPTIONS, workerId: `${hostname}:${pid}` },
    options.dispatcher,
  );
  if (typeof dispatcher.enabled !== 'boolean') {
    throw new InvalidOptionsError('dispatcher.enabled', 'must be a boolean');
  }
  for (const key of [
    'pollIntervalMs',
    'batchSize',
    'concurrency',
    'leaseMs',
    'sendTimeoutMs',
    'shutdownTimeoutMs',
    'eventLeaseMs',
  ] as const) {
    requirePositiveInteger(`dispatcher.${key}`, dispatcher[key]);
  }
  // The heartbeat looks at the lanes once a second, and writes no more often.
  requirePositiveInteger('dispatcher.heartbeatMs', dispatcher.heartbeatMs, 1_000);
  if (typeof dispatcher.workerId !== 'string' || dispatcher.workerId.length === 0) {
    throw new InvalidOptionsError('dispatcher.workerId', 'must be a non-empty string');
  }
  if (dispatcher.leaseMs < 2 * dispatcher.sendTimeoutMs) {
    throw new InvalidOptionsError(
      'dispatcher.leaseMs',
      `must be at least twice dispatcher.sendTimeoutMs (2 x ${dispatcher.sendTimeoutMs} ms): half the lease is the send, ` +
        `the rest lets its settle outlast a database restart before the row could be claimed and sent again; got ${dispatcher.leaseMs}`,
    );
  }
  const retry = resolveRetry(options.retry);

  const laneOptions = options.lanes ?? Object.fromEntries(DEFAULT_LANES.map((name) => [name, {}]));
  if (!laneOptions || typeof laneOptions !== 'object' || Object.keys(laneOptions).length === 0) {
    throw new InvalidOptionsError('lanes', 'must name at least one lane');
  }
  const unsubscribe = resolveUnsubscribe(options.unsubscribe);
  const lanes = Object.entries(laneOptions).map(([name, lane]) =>
    resolveLane(name, lane ?? {}, transport, dispatcher, unsubscribe),
  );
  requireAgreeingQuotas(lanes);
  const defaultLane = options.defaultLane ?? 'default';
  if (!lanes.some((lane) => lane.name === defaultLane)) {
    throw new InvalidOptionsError('defaultLane', `names no declared lane: ${JSON.stringify(defaultLane)}`);
  }

  const retention = withDefaults({ ...DEFAULT_RETENTION_OPTIONS, enabled: dispatcher.enabled }, options.retention);
  if (typeof retention.enabled !== 'boolean') throw new InvalidOptionsError('retention.enabled', 'must be a boolean');
  requireSpan('retention.keepClosedForMs', retention.keepClosedForMs);
  for (const key of ['batchSize', 'intervalMs'] as const) requirePositiveInteger(`retention.${key}`, retention[key]);
  requirePositiveInteger('retention.partitionsAhead', retention.partitionsAhead, MIN_PARTITIONS_AHEAD);
  const health = resolveHealth(options.health);

  const database = { ...withDefaults(DEFAULT_DATABASE_OPTIONS, options.database), ...resolvePooler(options.database) };
  for (const key of ['poolSize', 'statementTimeoutMs', 'connectTimeoutMs', 'startTimeoutMs'] as const) {
    requirePositiveInteger(`database.${key}`, database[key]);
  }
  if (database.schema !== null && !isPlainIdentifier(database.schema)) {
    throw new InvalidOptionsError(
      'database.schema',
      `must be a schema name PostgreSQL takes unquoted (lower case letters, digits and _, at most 63), got ${JSON.stringify(database.schema)}`,
    );
  }
  if (typeof database.migrateAtStart !== 'boolean') {
    throw new InvalidOptionsError('database.migrateAtStart', 'must be a boolean');
  }
  const requireTransaction = options.requireTransaction ?? false;
  if (typeof requireTransaction !== 'boolean') throw new InvalidOptionsError('requireTransaction', 'must be a boolean');
  if (database.url !== null && (typeof database.url !== 'string' || !POSTGRES_URL.test(database.url))) {
    throw new InvalidOptionsError('database.url', `must be a postgres:// URL, got ${shown(database.url)}`);
  }
  const leaseForSendAndSettle = leaseForSendAndSettleMs(dispatcher.sendTimeoutMs, database.statementTimeoutMs);
  if (dispatcher.leaseMs < leaseForSendAndSettle) {
    throw new InvalidOptionsError(
      'dispatcher.leaseMs',
      `must be at least dispatcher.sendTimeoutMs + database.statementTimeoutMs + ${CLIENT_TIMEOUT_MARGIN_MS} ms (the ` +
        `client's bound on a silent connection) + ${SETTLE_MARGIN_MS} ms (the settle's margin) = ` +
        `${dispatcher.sendTimeoutMs} + ${database.statementTimeoutMs} + ${CLIENT_TIMEOUT_MARGIN_MS} + ` +
        `${SETTLE_MARGIN_MS} = ${leaseForSendAndSettle} ms: a send that takes its whole deadline must leave its ` +
        `settle a whole statement before the row could be claimed and sent again; got ${dispatcher.leaseMs}`,
    );
  }

  const events = withDefaults(DEFAULT_EVENT_OPTIONS, options.events);
  if (events.record !== 'listened' && events.record !== 'all') {
    throw new InvalidOptionsError('events.record', `must be 'listened' or 'all', got ${JSON.stringify(events.record)}`);
  }
  requirePositiveInteger('events.listenerTimeoutMs', events.listenerTimeoutMs);
  requirePositiveInteger('events.concurrency', events.concurrency);
  requirePositiveInteger('events.maxQueued', events.maxQueued);

  const logging = withDefaults(DEFAULT_LOGGING_OPTIONS, options.logging);
  if (typeof logging.perMail !== 'boolean') throw new InvalidOptionsError('logging.perMail', 'must be a boolean');
  requirePositiveInteger('logging.summaryIntervalMs', logging.summaryIntervalMs, 0);

  return {
    ...resolveContent(options),
    transport,
    from: options.from,
    messageIdDomain: options.messageIdDomain,
    dispatcher,
    retry,
    lanes,
    defaultLane,
    retention,
    health,
    database,
    events,
    relay: resolveRelay(options.relay),
    verp: resolveVerp(options.verp),
    unsubscribe,
    requireTransaction,
    logging,
  };
}

function resolveLane(
  name: string,
  lane: LaneOptions,
  sharedTransport: ResolvedTransport,
  dispatcher: Required<DispatcherOptions>,
  unsubscribe: ResolvedUnsubscribe | null,
): ResolvedLane {
  if (!LANE_NAME_PATTERN.test(name)) {
    throw new InvalidOptionsError(
      `lanes.${name}`,
      'a lane name is lower-case letters, digits, _ and -, starting with a letter',
    );
  }
  const concurrency = requirePositiveInteger(`lanes.${name}.concurrency`, lane.concurrency ?? dispatcher.concurrency);
  if (
    lane.ratePerSecond !== undefined &&
    (typeof lane.ratePerSecond !== 'number' || !(lane.ratePerSecond > 0) || !Number.isFinite(lane.ratePerSecond))
  ) {
    throw new InvalidOptionsError(
      `lanes.${name}.ratePerSecond`,
      `must be a finite number > 0, got ${JSON.stringify(lane.ratePerSecond)}`,
    );
  }
  const priority = requirePositiveInteger(
    `lanes.${name}.priority`,
    lane.priority ?? DEFAULT_PRIORITIES[name] ?? 0,
    0,
    LARGEST_PRIORITY,
  );
  const transport =
    lane.transport === undefined ? sharedTransport : resolveTransport(lane.transport, `lanes.${name}.transport`);
  const quota = resolveQuota(
    name,
    lane.quota,
    transport.kind === 'object' && typeof transport.transport.sendQuota === 'function',
  );
  return {
    name,
    concurrency,
    ratePerSecond: lane.ratePerSecond ?? null,
    priority,
    transport,
    quota,
    unsubscribe: resolveLaneUnsubscribe(name, lane, unsubscribe, transport),
  };
}

/**
 * An object with a `send` method is a transport; it must have the rest of `MailTransport` too. Anything else is
 * SMTP, as a URL or as options.
 */
function resolveTransport(transport: TransportOption, option: string): ResolvedTransport {
  if (transport && typeof transport === 'object' && 'send' in transport) {
    for (const method of ['send', 'verify', 'close', 'open'] as const) {
      const value = (transport as unknown as Record<string, unknown>)[method];
      if (typeof value !== 'function' && !(method === 'open' && value === undefined))
        throw new InvalidOptionsError(
          option,
          `a transport object must implement MailTransport (send, verify, close and optionally open): ${method} is not a function`,
        );
    }
    return { kind: 'object', transport };
  }
  return { kind: 'smtp', options: resolveSmtpOptions(transport, option) };
}

function resolveContent(
  options: ReliableMailOptions,
): Pick<ResolvedReliableMailOptions, 'templates' | 'maxMessageBytes' | 'attachmentResolver'> {
  const { templates = [], maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES, attachmentResolver } = options;
  if (!Array.isArray(templates)) {
    throw new InvalidOptionsError('templates', 'must be an array of mail templates');
  }
  if (typeof maxMessageBytes !== 'number' || !Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1) {
    throw new InvalidOptionsError('maxMessageBytes', `must be an integer >= 1, got ${JSON.stringify(maxMessageBytes)}`);
  }
  if (attachmentResolver !== undefined && typeof attachmentResolver !== 'function') {
    throw new InvalidOptionsError('attachmentResolver', 'must be a function (ref) => Promise<Buffer | Readable>');
  }
  return { templates, maxMessageBytes, attachmentResolver: attachmentResolver ?? null };
}
