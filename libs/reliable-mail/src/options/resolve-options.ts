import { InvalidOptionsError } from '../errors.js';
import type { MailTemplate } from '../templates/mail-template.js';
import { attemptsToSpan, guaranteedSpanMs, type RetryPolicy } from '../shared/retry-policy.js';
import type { Verp } from '../shared/verp.js';
import { type ResolvedSmtpOptions, resolveSmtpOptions } from '../transport/smtp/smtp-transport-options.js';
import type {
  AttachmentResolver,
  DispatcherOptions,
  HealthOptions,
  LaneOptions,
  ReliableMailOptions,
  RetentionOptions,
  RetryOptions,
  DatabaseOptions,
  EventOptions,
  VerpOptions,
} from './reliable-mail-options.interface.js';

export interface ResolvedLane {
  name: string;
  concurrency: number;
  ratePerSecond: number | null;
  transport: ResolvedSmtpOptions;
}

export interface ResolvedReliableMailOptions {
  transport: ResolvedSmtpOptions;
  from: string;
  messageIdDomain: string;
  dispatcher: Required<DispatcherOptions>;
  retry: RetryPolicy;
  lanes: ResolvedLane[];
  defaultLane: string;
  retention: Required<RetentionOptions>;
  health: Required<HealthOptions>;
  database: Omit<Required<DatabaseOptions>, 'url'> & { url: string | null };
  events: Required<EventOptions>;
  templates: MailTemplate[];
  maxMessageBytes: number;
  attachmentResolver: AttachmentResolver | null;
  verp: Verp | null;
}

const DEFAULT_RETENTION_OPTIONS: Omit<Required<RetentionOptions>, 'enabled'> = {
  keepClosedForMs: 30 * 86_400_000,
  batchSize: 500,
  intervalMs: 600_000,
};

const DEFAULT_HEALTH_OPTIONS: Required<HealthOptions> = {
  maxBacklog: 10_000,
  maxLagMs: 300_000,
  deadLetterWindowMs: 3_600_000,
  maxDeadLetters: 0,
  maxDispatcherIdleMs: 60_000,
  verifySmtp: false,
  feedbackWindowMs: 86_400_000,
  maxComplaintRate: 0.001,
  maxHardBounceRate: 0.05,
  minSentForRates: 100,
};

const DEFAULT_DATABASE_OPTIONS = { url: null, poolSize: 10, statementTimeoutMs: 30_000, connectTimeoutMs: 10_000 };

const DEFAULT_LANES = ['critical', 'default', 'bulk'] as const;
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
};

/** `maxAttempts` defaults to as many attempts as the delays need to reach `maxAgeMs` (see `attemptsToSpan`). */
const DEFAULT_RETRY_OPTIONS: Omit<Required<RetryOptions>, 'maxAttempts'> = {
  baseDelayMs: 5_000,
  maxDelayMs: 3_600_000,
  maxAgeMs: 86_400_000,
};

const DEFAULT_EVENT_OPTIONS: Required<EventOptions> = {
  record: 'listened',
  listenerTimeoutMs: 30_000,
  maxQueued: 10_000,
};

/** 5 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 5 * 1024 * 1024;

/** A dot-atom local part without `+`, which separates it from the row id. */
const VERP_LOCAL_PART_PATTERN = /^[a-z0-9!#$%&'*/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*/=?^_`{|}~-]+)*$/i;

const HOSTNAME_PATTERN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

function requirePositiveInteger(option: string, value: unknown, minimum = 1): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
    throw new InvalidOptionsError(option, `must be an integer >= ${minimum}, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Applies defaults and rejects options the module cannot work with, naming the option. */
export function resolveOptions(
  options: ReliableMailOptions,
  hostname: string,
  pid: number,
): ResolvedReliableMailOptions {
  if (!options || typeof options !== 'object') {
    throw new InvalidOptionsError('options', 'must be an object');
  }
  const transport = resolveSmtpOptions(options.transport, 'transport');
  if (typeof options.from !== 'string' || !options.from.includes('@')) {
    throw new InvalidOptionsError('from', `must be an email address, got ${JSON.stringify(options.from)}`);
  }
  if (typeof options.messageIdDomain !== 'string' || !HOSTNAME_PATTERN.test(options.messageIdDomain)) {
    throw new InvalidOptionsError(
      'messageIdDomain',
      `must be a domain name such as "mail.example.com", got ${JSON.stringify(options.messageIdDomain)}`,
    );
  }

  const dispatcher = { ...DEFAULT_DISPATCHER_OPTIONS, workerId: `${hostname}:${pid}`, ...options.dispatcher };
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
  const lanes = Object.entries(laneOptions).map(([name, lane]) => resolveLane(name, lane ?? {}, transport, dispatcher));
  const defaultLane = options.defaultLane ?? 'default';
  if (!lanes.some((lane) => lane.name === defaultLane)) {
    throw new InvalidOptionsError('defaultLane', `names no declared lane: ${JSON.stringify(defaultLane)}`);
  }

  const retention = { ...DEFAULT_RETENTION_OPTIONS, enabled: dispatcher.enabled, ...options.retention };
  if (typeof retention.enabled !== 'boolean') throw new InvalidOptionsError('retention.enabled', 'must be a boolean');
  for (const key of ['keepClosedForMs', 'batchSize', 'intervalMs'] as const) {
    requirePositiveInteger(`retention.${key}`, retention[key]);
  }
  const health = { ...DEFAULT_HEALTH_OPTIONS, ...options.health };
  for (const key of [
    'maxBacklog',
    'maxLagMs',
    'deadLetterWindowMs',
    'maxDispatcherIdleMs',
    'feedbackWindowMs',
  ] as const) {
    requirePositiveInteger(`health.${key}`, health[key]);
  }
  requirePositiveInteger('health.maxDeadLetters', health.maxDeadLetters, 0);
  requirePositiveInteger('health.minSentForRates', health.minSentForRates, 0);
  for (const key of ['maxComplaintRate', 'maxHardBounceRate'] as const) {
    const rate = health[key];
    if (typeof rate !== 'number' || !(rate >= 0 && rate <= 1)) {
      throw new InvalidOptionsError(`health.${key}`, `must be a share between 0 and 1, got ${JSON.stringify(rate)}`);
    }
  }
  if (typeof health.verifySmtp !== 'boolean') throw new InvalidOptionsError('health.verifySmtp', 'must be a boolean');

  const database = { ...DEFAULT_DATABASE_OPTIONS, ...options.database };
  for (const key of ['poolSize', 'statementTimeoutMs', 'connectTimeoutMs'] as const) {
    requirePositiveInteger(`database.${key}`, database[key]);
  }
  if (database.url !== null && !/^postgres(ql)?:\/\//.test(String(database.url))) {
    throw new InvalidOptionsError('database.url', `must be a postgres:// URL, got ${JSON.stringify(database.url)}`);
  }

  const events = { ...DEFAULT_EVENT_OPTIONS, ...options.events };
  if (events.record !== 'listened' && events.record !== 'all') {
    throw new InvalidOptionsError('events.record', `must be 'listened' or 'all', got ${JSON.stringify(events.record)}`);
  }
  requirePositiveInteger('events.listenerTimeoutMs', events.listenerTimeoutMs);
  requirePositiveInteger('events.maxQueued', events.maxQueued);

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
    verp: resolveVerp(options.verp),
  };
}

function resolveVerp(verp: VerpOptions | undefined): Verp | null {
  if (verp === undefined) return null;
  if (!verp || typeof verp.domain !== 'string' || !HOSTNAME_PATTERN.test(verp.domain)) {
    throw new InvalidOptionsError('verp.domain', `must be a domain name, got ${JSON.stringify(verp?.domain)}`);
  }
  const { localPart = 'bounces' } = verp;
  // The row id takes 37 characters of the 64 a local part may have.
  if (typeof localPart !== 'string' || localPart.length > 26 || !VERP_LOCAL_PART_PATTERN.test(localPart)) {
    throw new InvalidOptionsError(
      'verp.localPart',
      `must be up to 26 characters of an address's local part, without "+", got ${JSON.stringify(localPart)}`,
    );
  }
  return { domain: verp.domain, localPart };
}

function resolveLane(
  name: string,
  lane: LaneOptions,
  sharedTransport: ResolvedSmtpOptions,
  dispatcher: Required<DispatcherOptions>,
): ResolvedLane {
  if (!LANE_NAME_PATTERN.test(name)) {
    throw new InvalidOptionsError(
      `lanes.${name}`,
      'a lane name is lower-case letters, digits, _ and -, starting with a letter',
    );
  }
  const concurrency = requirePositiveInteger(`lanes.${name}.concurrency`, lane.concurrency ?? dispatcher.concurrency);
  if (lane.ratePerSecond !== undefined && (typeof lane.ratePerSecond !== 'number' || !(lane.ratePerSecond > 0))) {
    throw new InvalidOptionsError(
      `lanes.${name}.ratePerSecond`,
      `must be a number > 0, got ${JSON.stringify(lane.ratePerSecond)}`,
    );
  }
  const transport =
    lane.transport === undefined ? sharedTransport : resolveSmtpOptions(lane.transport, `lanes.${name}.transport`);
  return { name, concurrency, ratePerSecond: lane.ratePerSecond ?? null, transport };
}

/**
 * The retry policy. The attempts must last as long as `maxAgeMs` at their shortest delays: otherwise an outage
 * shorter than the age limit (or a greylisting server) would dead-letter mail by running out of attempts.
 */
function resolveRetry(options: RetryOptions = {}): RetryPolicy {
  const delays = { ...DEFAULT_RETRY_OPTIONS, ...options };
  for (const key of ['baseDelayMs', 'maxDelayMs', 'maxAgeMs'] as const)
    requirePositiveInteger(`retry.${key}`, delays[key]);
  if (delays.maxDelayMs < delays.baseDelayMs) {
    throw new InvalidOptionsError('retry.maxDelayMs', `must be >= retry.baseDelayMs (${delays.baseDelayMs})`);
  }
  const needed = attemptsToSpan(delays);
  if (options.maxAttempts === undefined) return { ...delays, maxAttempts: needed };
  const maxAttempts = requirePositiveInteger('retry.maxAttempts', options.maxAttempts);
  const span = guaranteedSpanMs(maxAttempts, delays);
  if (span < delays.maxAgeMs) {
    throw new InvalidOptionsError(
      'retry.maxAttempts',
      `${maxAttempts} attempts, waiting from ${delays.baseDelayMs} ms doubling up to ${delays.maxDelayMs} ms, may all be spent ` +
        `in ${span} ms, before retry.maxAgeMs (${delays.maxAgeMs} ms): a shorter outage could dead-letter mail. ` +
        `Allow at least ${needed} attempts (the default), or lower retry.maxAgeMs`,
    );
  }
  return { ...delays, maxAttempts };
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
