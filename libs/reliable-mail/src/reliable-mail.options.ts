import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { InvalidOptionsError } from './errors.js';
import type { AttachmentResolver } from './templates/content-options.js';
import type { MailTemplate } from './templates/mail-template.js';

/** nodemailer's pooled SMTP options; `pool` and `maxRequeues` are fixed by reliable-mail (see `SmtpMailTransport`). */
export type SmtpTransportOptions = Omit<SMTPPool.Options, 'pool' | 'maxRequeues'>;

export interface DispatcherOptions {
  /** Run the dispatcher in this instance. An instance that only enqueues sets `false`. Default `true`. */
  enabled?: boolean;
  /** How often an idle dispatcher looks for due rows (the safety net under LISTEN/NOTIFY). Default 1000. */
  pollIntervalMs?: number;
  /** The most rows one claim takes. Default 50. */
  batchSize?: number;
  /** The most SMTP sends in flight in this instance. Default 8. */
  concurrency?: number;
  /**
   * How long a claim holds a row; after it another worker may claim the row again. Must exceed twice the longest
   * send the transport's timeouts allow (a row claimed ahead waits for one send, then takes one). Default 600000.
   */
  leaseMs?: number;
  /** How long shutdown waits for sends in flight. Default 30000. */
  shutdownTimeoutMs?: number;
  /** How long an event that was recorded but not confirmed as emitted waits before any instance emits it again. Default 30000. */
  eventLeaseMs?: number;
  /** Names this worker in attempts and logs. Default `<hostname>:<pid>`. */
  workerId?: string;
}

export interface RetryOptions {
  /** Attempts before a transiently failing row is dead-lettered. Default 8. */
  maxAttempts?: number;
  /** The first retry waits up to this long; each next one up to twice as long. Default 5000. */
  baseDelayMs?: number;
  /** The cap of one retry delay. Default 3600000 (1 hour). */
  maxDelayMs?: number;
  /** A row older than this is dead-lettered instead of retried. Default 86400000 (24 hours). */
  maxAgeMs?: number;
}

export interface RetentionOptions {
  /** Delete closed rows on a schedule in this instance. Default `true`. */
  enabled?: boolean;
  /** Sent, cancelled, expired and suppressed rows older than this are deleted with their attempts. Default 30 days. */
  keepClosedForMs?: number;
  /** Rows per delete statement, small enough never to hold locks for long. Default 500. */
  batchSize?: number;
  /** How often the cleanup runs. Default 600000 (10 minutes). */
  intervalMs?: number;
}

export interface HealthOptions {
  /** Rows waiting to be sent (due, being sent or retrying) above this make the indicator fail. Default 10000. */
  maxBacklog?: number;
  /** A row waiting longer than this since it was due makes the indicator fail. Default 300000 (5 minutes). */
  maxLagMs?: number;
  /** The window in which dead letters are counted. Default 3600000 (1 hour). */
  deadLetterWindowMs?: number;
  /** Dead letters in the window above this make the indicator fail. Default 0. */
  maxDeadLetters?: number;
  /** A dispatcher whose loop has not run for this long is reported dead. Default 60000. */
  maxDispatcherIdleMs?: number;
  /** Also ask the SMTP server (`verify`) on every check. Default `false`. */
  verifySmtp?: boolean;
}

export interface LaneOptions {
  /** The most sends in flight in this lane, in this instance. Default: `dispatcher.concurrency`. */
  concurrency?: number;
  /** The most messages per second this lane sends from this instance. Default: unlimited. */
  ratePerSecond?: number;
  /** A transport of the lane's own (providers keep separate streams for broadcast mail). Default: `transport`. */
  transport?: string | SmtpTransportOptions;
}

export interface ReliableMailOptions {
  /** An SMTP URL (`smtp://user:pass@host:587`) or nodemailer SMTP options. */
  transport: string | SmtpTransportOptions;
  /** Default sender, used when a mail has no `from`. */
  from: string;
  /** The right-hand side of every Message-ID (`<uuid@messageIdDomain>`). */
  messageIdDomain: string;
  dispatcher?: DispatcherOptions;
  retry?: RetryOptions;
  /**
   * Lanes, each with its own claim loop and capacity, so that a bulk backlog never delays a login code.
   * Default: `critical`, `default` and `bulk`, each with `dispatcher.concurrency`.
   */
  lanes?: Record<string, LaneOptions>;
  /** The lane of an enqueue that names none. Default `default`. */
  defaultLane?: string;
  /**
   * Templates a mail can name (`enqueue({ template, params })`), rendered at send time; several versions of a
   * name may be given. More can be added from a provider through `MailTemplateRegistry.register`.
   */
  templates?: MailTemplate[];
  /**
   * The largest mail enqueue accepts, in bytes: subject, body (or template parameters), headers and inline
   * attachments (counted decoded). Referenced attachments do not count. Default 5 MiB.
   */
  maxMessageBytes?: number;
  /** Fetches attachments given as `{ ref }` at send time; without it such an attachment is refused at enqueue. */
  attachmentResolver?: AttachmentResolver;
  retention?: RetentionOptions;
  health?: HealthOptions;
}

export interface ResolvedLane {
  name: string;
  concurrency: number;
  ratePerSecond: number | null;
  transport: string | SmtpTransportOptions;
  /** Whether `transport` is the lane's own rather than the module's shared one. */
  ownTransport: boolean;
}

export interface ResolvedReliableMailOptions {
  transport: string | SmtpTransportOptions;
  from: string;
  messageIdDomain: string;
  dispatcher: Required<DispatcherOptions>;
  retry: Required<RetryOptions>;
  lanes: ResolvedLane[];
  defaultLane: string;
  retention: Required<RetentionOptions>;
  health: Required<HealthOptions>;
}

export const DEFAULT_RETENTION_OPTIONS: Required<RetentionOptions> = {
  enabled: true,
  keepClosedForMs: 30 * 86_400_000,
  batchSize: 500,
  intervalMs: 600_000,
};

export const DEFAULT_HEALTH_OPTIONS: Required<HealthOptions> = {
  maxBacklog: 10_000,
  maxLagMs: 300_000,
  deadLetterWindowMs: 3_600_000,
  maxDeadLetters: 0,
  maxDispatcherIdleMs: 60_000,
  verifySmtp: false,
};

export const DEFAULT_LANES = ['critical', 'default', 'bulk'] as const;
const LANE_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

export const DEFAULT_DISPATCHER_OPTIONS: Omit<Required<DispatcherOptions>, 'workerId'> = {
  enabled: true,
  pollIntervalMs: 1_000,
  batchSize: 50,
  concurrency: 8,
  leaseMs: 600_000,
  shutdownTimeoutMs: 30_000,
  eventLeaseMs: 30_000,
};

export const DEFAULT_RETRY_OPTIONS: Required<RetryOptions> = {
  maxAttempts: 8,
  baseDelayMs: 5_000,
  maxDelayMs: 3_600_000,
  maxAgeMs: 86_400_000,
};

/** The SMTP timeouts used when the transport options do not set them; all of them must fit in the lease. */
export const DEFAULT_SMTP_TIMEOUTS = {
  connectionTimeout: 30_000,
  greetingTimeout: 30_000,
  socketTimeout: 120_000,
} as const;

const HOSTNAME_PATTERN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

function requirePositiveInteger(option: string, value: unknown, minimum = 1): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
    throw new InvalidOptionsError(option, `must be an integer >= ${minimum}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function resolveTransport(transport: unknown, option = 'transport'): string | SmtpTransportOptions {
  if (typeof transport === 'string') {
    let url: URL;
    try {
      url = new URL(transport);
    } catch {
      throw new InvalidOptionsError(option, `is not a valid URL: ${JSON.stringify(transport)}`);
    }
    if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
      throw new InvalidOptionsError(option, `must be an smtp:// or smtps:// URL, got ${url.protocol}//`);
    }
    return transport;
  }
  if (transport && typeof transport === 'object') {
    const { host } = transport as SmtpTransportOptions;
    if (typeof host !== 'string' || host.length === 0) {
      throw new InvalidOptionsError(`${option}.host`, 'must be a non-empty string');
    }
    return transport;
  }
  throw new InvalidOptionsError(option, 'must be an SMTP URL or nodemailer SMTP options');
}

/** The longest a single SMTP conversation can take before nodemailer gives up, from the transport's timeouts. */
export function longestSendMs(transport: string | SmtpTransportOptions): number {
  const options = typeof transport === 'string' ? {} : transport;
  return (
    (options.connectionTimeout ?? DEFAULT_SMTP_TIMEOUTS.connectionTimeout) +
    (options.greetingTimeout ?? DEFAULT_SMTP_TIMEOUTS.greetingTimeout) +
    (options.socketTimeout ?? DEFAULT_SMTP_TIMEOUTS.socketTimeout)
  );
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
  const transport = resolveTransport(options.transport);
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
    'shutdownTimeoutMs',
    'eventLeaseMs',
  ] as const) {
    requirePositiveInteger(`dispatcher.${key}`, dispatcher[key]);
  }
  if (typeof dispatcher.workerId !== 'string' || dispatcher.workerId.length === 0) {
    throw new InvalidOptionsError('dispatcher.workerId', 'must be a non-empty string');
  }
  const retry = { ...DEFAULT_RETRY_OPTIONS, ...options.retry };
  for (const key of ['maxAttempts', 'baseDelayMs', 'maxDelayMs', 'maxAgeMs'] as const) {
    requirePositiveInteger(`retry.${key}`, retry[key]);
  }
  if (retry.maxDelayMs < retry.baseDelayMs) {
    throw new InvalidOptionsError('retry.maxDelayMs', `must be >= retry.baseDelayMs (${retry.baseDelayMs})`);
  }

  const laneOptions = options.lanes ?? Object.fromEntries(DEFAULT_LANES.map((name) => [name, {}]));
  if (!laneOptions || typeof laneOptions !== 'object' || Object.keys(laneOptions).length === 0) {
    throw new InvalidOptionsError('lanes', 'must name at least one lane');
  }
  const lanes = Object.entries(laneOptions).map(([name, lane]) => resolveLane(name, lane ?? {}, transport, dispatcher));
  const defaultLane = options.defaultLane ?? 'default';
  if (!lanes.some((lane) => lane.name === defaultLane)) {
    throw new InvalidOptionsError('defaultLane', `names no declared lane: ${JSON.stringify(defaultLane)}`);
  }

  const retention = { ...DEFAULT_RETENTION_OPTIONS, ...options.retention };
  if (typeof retention.enabled !== 'boolean') throw new InvalidOptionsError('retention.enabled', 'must be a boolean');
  for (const key of ['keepClosedForMs', 'batchSize', 'intervalMs'] as const) {
    requirePositiveInteger(`retention.${key}`, retention[key]);
  }
  const health = { ...DEFAULT_HEALTH_OPTIONS, ...options.health };
  for (const key of ['maxBacklog', 'maxLagMs', 'deadLetterWindowMs', 'maxDispatcherIdleMs'] as const) {
    requirePositiveInteger(`health.${key}`, health[key]);
  }
  requirePositiveInteger('health.maxDeadLetters', health.maxDeadLetters, 0);
  if (typeof health.verifySmtp !== 'boolean') throw new InvalidOptionsError('health.verifySmtp', 'must be a boolean');

  return {
    transport,
    from: options.from,
    messageIdDomain: options.messageIdDomain,
    dispatcher,
    retry,
    lanes,
    defaultLane,
    retention,
    health,
  };
}

function resolveLane(
  name: string,
  lane: LaneOptions,
  sharedTransport: string | SmtpTransportOptions,
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
    lane.transport === undefined ? sharedTransport : resolveTransport(lane.transport, `lanes.${name}.transport`);
  // A row claimed ahead waits for at most one send before its own starts: its lease must outlast two sends.
  const sendBound = longestSendMs(transport);
  if (dispatcher.leaseMs <= 2 * sendBound) {
    throw new InvalidOptionsError(
      'dispatcher.leaseMs',
      `must be longer than twice the longest SMTP send the transport timeouts allow (2 x ${sendBound} ms), ` +
        `or another worker could claim a row that is still being sent; got ${dispatcher.leaseMs}`,
    );
  }
  return {
    name,
    concurrency,
    ratePerSecond: lane.ratePerSecond ?? null,
    transport,
    ownTransport: lane.transport !== undefined,
  };
}
