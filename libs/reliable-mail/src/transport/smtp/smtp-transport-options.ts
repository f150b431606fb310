import { InvalidOptionsError } from '../../errors.js';
import { type DkimOptions, type ResolvedDkimOptions, resolveDkimOptions } from './dkim-options.js';
import type { SMTPConnectionAuth, SMTPConnectionOptions } from 'nodemailer/lib/smtp-connection';

/**
 * How to reach an SMTP server: nodemailer's connection options, plus how many messages a connection carries and
 * how many recipients one SMTP transaction takes. Connections are pooled per lane by reliable-mail itself, sized
 * by the lane's `concurrency`, and every retry is the outbox's own.
 */
export interface SmtpTransportOptions extends Pick<
  SMTPConnectionOptions,
  | 'host'
  | 'port'
  | 'secure'
  | 'servername'
  | 'ignoreTLS'
  | 'requireTLS'
  | 'opportunisticTLS'
  | 'name'
  | 'localAddress'
  | 'connectionTimeout'
  | 'greetingTimeout'
  | 'socketTimeout'
  | 'dnsTimeout'
  | 'tls'
> {
  host: string;
  auth?: SMTPConnectionAuth;
  /**
   * Messages one connection carries before it is closed and a fresh one opened.
   * @default 100
   */
  maxMessages?: number;
  /**
   * The most recipients of one SMTP transaction; a mail with more goes out in several transactions, each with the
   * same message and Message-ID. RFC 5321 §4.5.3.1.8 has servers take at least 100.
   * @default 100
   */
  maxRecipientsPerTransaction?: number;
  /**
   * Signs every message with DKIM (rsa-sha256) before it goes out, on every attempt: `{ domainName, keySelector,
   * privateKey }`, as nodemailer names them, for one key. A key that cannot be read, an invalid domain or selector
   * stop the start with an `InvalidOptionsError`. Rotating the key, the DNS record and DMARC alignment: see
   * docs/transports.md, DKIM.
   */
  dkim?: DkimOptions;
}

/** The SMTP options with every default applied, and the DKIM key read. */
export type ResolvedSmtpOptions = Omit<SmtpTransportOptions, 'dkim'> & { dkim?: ResolvedDkimOptions } & Required<
    Pick<
      SmtpTransportOptions,
      'connectionTimeout' | 'greetingTimeout' | 'socketTimeout' | 'maxMessages' | 'maxRecipientsPerTransaction'
    >
  >;

/**
 * Timeouts of one connection, each per step (nodemailer's socket timeout is per read): the dispatcher's
 * `sendTimeoutMs` bounds the whole send whatever they are.
 */
const DEFAULT_SMTP_OPTIONS = {
  connectionTimeout: 30_000,
  greetingTimeout: 30_000,
  socketTimeout: 120_000,
  maxMessages: 100,
  maxRecipientsPerTransaction: 100,
} as const;

/** nodemailer options reliable-mail does its own way, with what to use instead. */
const REPLACED_OPTIONS: Record<string, string> = {
  pool: 'reliable-mail pools connections per lane itself',
  maxConnections:
    "each lane opens up to its concurrency's worth: set lanes.<name>.concurrency or dispatcher.concurrency",
  rateLimit: 'set lanes.<name>.ratePerSecond',
  rateDelta: 'set lanes.<name>.ratePerSecond',
  maxRequeues: "every retry is the outbox's own, recorded as an attempt",
};
const ALLOWED_OPTIONS = new Set([
  'host',
  'port',
  'secure',
  'servername',
  'ignoreTLS',
  'requireTLS',
  'opportunisticTLS',
  'name',
  'localAddress',
  'connectionTimeout',
  'greetingTimeout',
  'socketTimeout',
  'dnsTimeout',
  'tls',
  'auth',
  'maxMessages',
  'maxRecipientsPerTransaction',
  'dkim',
]);

function positiveInteger(options: Record<string, unknown>, key: string, option: string): void {
  const value = options[key];
  if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < 1)) {
    throw new InvalidOptionsError(`${option}.${key}`, `must be an integer >= 1, got ${JSON.stringify(value)}`);
  }
}

/** An SMTP URL (`smtp://user:pass@host:587`, `smtps://…`) as options. */
function fromUrl(transport: string, option: string): Omit<SmtpTransportOptions, 'dkim'> {
  let url: URL;
  try {
    url = new URL(transport);
  } catch {
    throw new InvalidOptionsError(option, `is not a valid URL: ${JSON.stringify(transport)}`);
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new InvalidOptionsError(option, `must be an smtp:// or smtps:// URL, got ${url.protocol}//`);
  }
  const secure = url.protocol === 'smtps:';
  const options: Omit<SmtpTransportOptions, 'dkim'> = {
    host: url.hostname,
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
  };
  if (url.username) options.auth = { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
  return options;
}

/**
 * Applies the defaults to an SMTP URL or options and refuses what reliable-mail would not honour: a pool option it
 * replaces, an unknown key, or a timeout of 0 (nodemailer would silently use its own 10-minute default). A DKIM key
 * is read here, so that one that cannot sign stops the start.
 */
export function resolveSmtpOptions(transport: unknown, option: string): ResolvedSmtpOptions {
  if (typeof transport === 'string') return { ...DEFAULT_SMTP_OPTIONS, ...fromUrl(transport, option) };
  if (!transport || typeof transport !== 'object') {
    throw new InvalidOptionsError(option, 'must be an SMTP URL or SMTP options such as { host, port, auth }');
  }
  const options = transport as Record<string, unknown>;
  for (const key of Object.keys(options)) {
    if (REPLACED_OPTIONS[key])
      throw new InvalidOptionsError(`${option}.${key}`, `is not used: ${REPLACED_OPTIONS[key]}`);
    if (!ALLOWED_OPTIONS.has(key))
      throw new InvalidOptionsError(`${option}.${key}`, 'is not an SMTP option reliable-mail knows');
  }
  if (typeof options.host !== 'string' || options.host.length === 0) {
    throw new InvalidOptionsError(`${option}.host`, 'must be a non-empty string');
  }
  for (const key of [
    'connectionTimeout',
    'greetingTimeout',
    'socketTimeout',
    'dnsTimeout',
    'maxMessages',
    'maxRecipientsPerTransaction',
  ]) {
    positiveInteger(options, key, option);
  }
  const { dkim, ...connection } = options as unknown as SmtpTransportOptions;
  return {
    ...DEFAULT_SMTP_OPTIONS,
    ...connection,
    ...(dkim === undefined ? {} : { dkim: resolveDkimOptions(dkim, `${option}.dkim`) }),
  };
}
