import type { Readable } from 'node:stream';
import type { MailTemplateFolder } from '../templates/file-templates.js';
import type { MailTemplate } from '../templates/mail-template.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import type { RelayDestination } from '../relay/relay-destination.interface.js';
import type { SmtpTransportOptions } from '../transport/smtp/smtp-transport-options.js';

// The options of `ReliableMailModule.forRoot()`, all in one file as their documentation (declarations only, hence
// its length). Every one is checked at start-up: an `InvalidOptionsError` names the option it refuses (see
// resolve-options.ts).

/**
 * Fetches a referenced attachment at send time: the bytes, or a stream read while the message is built. A throw or
 * a rejected promise fails the row permanently, with the error's message as the reason. `signal` aborts when the
 * send's deadline passes (`dispatcher.sendTimeoutMs`); a fetch may hand it on (to `fetch`, the AWS SDK, …).
 */
export type AttachmentResolver = (
  ref: string,
  context: { signal: AbortSignal },
) => Promise<Buffer | Uint8Array | Readable> | Buffer | Uint8Array | Readable;

export interface DispatcherOptions {
  /**
   * Run the dispatcher in this instance. An instance that only enqueues sets `false`.
   * @default `true`
   */
  enabled?: boolean;
  /**
   * How often an idle dispatcher looks for due rows (the safety net under LISTEN/NOTIFY).
   * @default 1000
   */
  pollIntervalMs?: number;
  /**
   * The most rows one claim takes.
   * @default 50
   */
  batchSize?: number;
  /**
   * The most SMTP sends in flight in this instance.
   * @default 8
   */
  concurrency?: number;
  /**
   * How long a claim holds a row; after it another worker may claim the row again. At least twice `sendTimeoutMs`:
   * the send takes at most half of it, and the rest is the time its settle may spend retrying through a database
   * restart or failover before the row could be claimed (and sent) again. And at least `sendTimeoutMs` +
   * `database.statementTimeoutMs` + 5 s + 1 s, so that after a send that took its whole deadline the settle may
   * still wait a statement's whole bound; no settle waits past the lease.
   * @default 600000
   */
  leaseMs?: number;
  /**
   * The hard deadline of one send, enforced by the dispatcher whatever the server or the app's code do: rendering,
   * fetching attachments and the whole SMTP conversation. A conversation still running then is cut; its recipients
   * are `unknown` if the whole message had been written, deferred otherwise.
   * @default 180000
   */
  sendTimeoutMs?: number;
  /**
   * How long shutdown waits for sends in flight.
   * @default 30000
   */
  shutdownTimeoutMs?: number;
  /**
   * How long an event that was recorded but not confirmed as emitted waits before any instance emits it again.
   * @default 30000
   */
  eventLeaseMs?: number;
  /**
   * How often this instance writes its heartbeat and its lanes' state (running, paused, in outage) to the instance
   * table, which the console reads; a lane that pauses or resumes is written within a second or two whatever this
   * is. At least 1000.
   * @default 10000
   */
  heartbeatMs?: number;
  /**
   * Names this worker in attempts, logs and the instance table, where it is the key: each instance needs its own.
   * @default `<hostname>:<pid>`
   */
  workerId?: string;
}

/** reliable-mail's own connections (dispatcher, wake-up listener, events, retention, health): a pool of their own. */
export interface DatabaseOptions {
  /**
   * Where those connections go, as a `postgres://` URL: PostgreSQL itself, or a pooler such as PgBouncer (say
   * which in `pooler`). Required in an app without MikroORM.
   * @default the MikroORM connection's settings
   */
  url?: string;
  /**
   * What `url` (or the MikroORM connection) goes through. `'none'`: PostgreSQL itself. `'session'`: a pooler that
   * gives each connection a server session of its own while it lasts (PgBouncer's `pool_mode = session`): the
   * settings are SET once per connection instead of sent at connect, which PgBouncer refuses. `'transaction'`: a
   * pooler that lends a server session per transaction (PgBouncer's `pool_mode = transaction`): no session state at
   * all, so each statement runs in a transaction of its own with its settings SET LOCAL, statements are not
   * prepared (see `preparedStatements`), and there is no LISTEN but on `listenUrl`: without it the dispatchers
   * poll.
   * @default 'none'
   */
  pooler?: 'none' | 'session' | 'transaction';
  /**
   * Whether statements are prepared once per connection and run by name. Under `pooler: 'transaction'` only with
   * PgBouncer 1.21 or later and its `max_prepared_statements` above 0 (reliable-mail cannot ask PgBouncer: say so
   * here); with an older one or with it 0, a statement meets another server session than the one that prepared it.
   * @default true, and false with pooler 'transaction'
   */
  preparedStatements?: boolean;
  /**
   * A `postgres://` URL of PostgreSQL itself, for the one long-lived connection that LISTENs for the NOTIFY of an
   * enqueue, so that an idle dispatcher starts at once instead of at its next poll; its credentials and TLS settings
   * (`?sslmode=`) are its own. Only with a pooler, and not to the pooler's host and port: without one, `url` takes
   * LISTEN itself.
   * @default none: LISTEN through `url`, or no LISTEN at all with pooler 'transaction'
   */
  listenUrl?: string;
  /**
   * The PostgreSQL schema of reliable-mail's tables. Installations whose tables the MikroORM migrations of earlier
   * releases made in the app's own schema (`public`) are found there when this is not set, and stay there.
   * @default 'reliable_mail'
   */
  schema?: string;
  /**
   * Brings reliable-mail's schema to this release's version at start, under an advisory lock (many instances may
   * start at once), instead of `npx reliable-mail migrate` at deploy time.
   * @default false
   */
  migrateAtStart?: boolean;
  /**
   * How long the start waits for a database that does not answer (a deploy during a failover), trying again with
   * backoff, before it fails naming the host.
   * @default 60000
   */
  startTimeoutMs?: number;
  /**
   * The most connections of the pool.
   * @default 10
   */
  poolSize?: number;
  /**
   * The longest any of reliable-mail's statements may run (`statement_timeout`); the client gives up 5 s later on a
   * server that does not answer at all, and drops that connection. `dispatcher.leaseMs` must leave room for it.
   * @default 30000
   */
  statementTimeoutMs?: number;
  /**
   * How long opening a connection may take.
   * @default 10000
   */
  connectTimeoutMs?: number;
}

/** How events reach the app's listeners. */
export interface EventOptions {
  /**
   * Which events are recorded (in the settle's transaction) for at-least-once emission: `listened`, those something
   * in this process listens for, by name, by a wildcard pattern or `onAny`; `all`, every one.
   * @default 'listened'
   */
  record?: 'listened' | 'all';
  /**
   * How long the listeners of one event may take. One that does not finish in time leaves its event unconfirmed:
   * it is emitted again after `dispatcher.eventLeaseMs`, and meanwhile it holds nothing else up.
   * @default 30000
   */
  listenerTimeoutMs?: number;
  /**
   * Emissions whose listeners run at once in this process: listeners that write to the app's database share its
   * pool with the app. A listener that does not finish holds its place until `listenerTimeoutMs`. @default 16
   */
  concurrency?: number;
  /** Events waiting for emission or being emitted in this process; past this they wait in the table. @default 10000 */
  maxQueued?: number;
}

/**
 * Brokers the recorded events are published to, at least once, apart from the app's listeners: each destination is
 * owed every event of its names recorded from the moment it is first registered (at the start of an instance that
 * names it), and keeps a backlog in the database while its broker is down. See docs/events.md "Relay to a broker".
 */
export interface RelayOptions {
  destinations: RelayDestination[];
  /**
   * How often each destination looks for events to publish when this instance recorded none meanwhile (an event
   * recorded here is published at once).
   * @default 1000
   */
  pollIntervalMs?: number;
  /** Events one destination claims and publishes at once. @default 100 */
  batchSize?: number;
  /**
   * How long a broker may take to confirm one event; past it the event is published again later (with the same
   * message id).
   * @default 10000
   */
  publishTimeoutMs?: number;
  /** Health fails while a destination's oldest unpublished event is older than this. @default 600000 (10 minutes) */
  maxBacklogAgeMs?: number;
}

export interface RetryOptions {
  /**
   * Attempts (a lane outage's are not counted) before a row that keeps failing is dead-lettered. It must let the
   * delays reach `maxAgeMs` even at their shortest, or a shorter outage could dead-letter mail: a smaller value is
   * refused at start-up, naming the numbers.
   * @default as many as the delays need to reach `maxAgeMs` (58 with the other defaults)
   */
  maxAttempts?: number;
  /**
   * The first retry waits between half this and this; each next one twice as long (equal jitter).
   * @default 5000
   */
  baseDelayMs?: number;
  /**
   * The cap of one retry delay.
   * @default 3600000 (1 hour)
   */
  maxDelayMs?: number;
  /**
   * A row older than this is dead-lettered instead of retried.
   * @default 86400000 (24 hours)
   */
  maxAgeMs?: number;
}

export interface RetentionOptions {
  /**
   * Delete closed rows on a schedule in this instance.
   * @default `dispatcher.enabled`: retention runs where the dispatcher runs
   */
  enabled?: boolean;
  /**
   * Sent, cancelled, expired and suppressed rows older than this are deleted with their attempts.
   * @default 30 days
   */
  keepClosedForMs?: number;
  /**
   * Rows per delete statement, small enough never to hold locks for long.
   * @default 500
   */
  batchSize?: number;
  /**
   * How often the cleanup runs.
   * @default 600000 (10 minutes)
   */
  intervalMs?: number;
  /**
   * In a partitioned outbox (`npx reliable-mail migrate --partition`), the days after today whose partitions each
   * run makes ahead; health fails when fewer than 2 are there. Unused by a plain outbox.
   * @default 3
   */
  partitionsAhead?: number;
}

export interface HealthOptions {
  /**
   * Rows waiting to be sent (due, being sent or retrying) above this make the indicator fail.
   * @default 10000
   */
  maxBacklog?: number;
  /**
   * A row waiting longer than this since it was due makes the indicator fail.
   * @default 300000 (5 minutes)
   */
  maxLagMs?: number;
  /**
   * The window in which dead letters are counted.
   * @default 3600000 (1 hour)
   */
  deadLetterWindowMs?: number;
  /**
   * Dead letters in the window above this make the indicator fail.
   * @default 0
   */
  maxDeadLetters?: number;
  /**
   * A dispatcher whose loop has not run for this long is reported dead.
   * @default 60000
   */
  maxDispatcherIdleMs?: number;
  /**
   * An event of a name this instance listens for, recorded this long ago and still not heard, makes the indicator
   * fail: a listener that keeps throwing or hanging gets it again every `dispatcher.eventLeaseMs`.
   * @default 600000 (10 minutes)
   */
  maxEventAgeMs?: number;
  /**
   * Also ask each lane's transport, its SMTP server or provider API (`verify`), on every check: reported as
   * `transports`, and failing as `transports`.
   * @default `false`
   */
  verifyTransports?: boolean;
  /**
   * `verifyTransports` under its earlier name, for every transport: reported as `smtp`, and failing as `smtp`.
   * @deprecated Use `verifyTransports`; this name goes in the next major version.
   * @default `false`
   */
  verifySmtp?: boolean;
  /**
   * The window in which bounces and complaints (delivery feedback) are counted against the mails sent.
   * @default 86400000 (24 hours)
   */
  feedbackWindowMs?: number;
  /**
   * Complaints per mail sent in the window above which the indicator fails. Providers review or suspend senders
   * whose complaint rate passes 0.1% to 0.5% (Amazon SES, Gmail's sender guidelines).
   * @default 0.001
   */
  maxComplaintRate?: number;
  /**
   * Hard bounces per mail sent in the window above which the indicator fails (Amazon SES reviews accounts at 5%).
   * @default 0.05
   */
  maxHardBounceRate?: number;
  /**
   * Below this many mails sent in the window the rates are shown but fail nothing: one complaint in ten mails
   * says little yet.
   * @default 100
   */
  minSentForRates?: number;
}

/**
 * What reliable-mail logs, through Nest's logger: the app's logger and its levels decide what is printed, as for
 * every line of the module. By default no line per mail (Nest's default logger prints debug lines too, so levels
 * alone would not keep a developer's console readable): a line when something changes (a lane pauses because its
 * server refuses the session, asks to slow down or drops connections, and one when it resumes, with how long it
 * was paused and how many probes failed; the database becomes unavailable, and answers again, with how long it was
 * away and how many failures were not logged), a line per dead-lettered mail, errors that are no outage (a statement
 * refused, a transport's bug), and the summary below.
 */
export interface LoggingOptions {
  /**
   * A line for each mail: each claim (debug), and each attempt's outcome, naming the row, its Message-ID and its
   * lane: sent at debug level (shown only where the app's logger prints debug, as Nest's default logger does),
   * deferred, refused, unknown or met by a lane outage at warn.
   * @default false
   */
  perMail?: boolean;
  /**
   * How often the dispatcher logs one summary line: the attempts of the interval by outcome (sent, transient,
   * permanent, unknown, …) with the last reply of each outcome but sent (its code, enhanced status and text, the
   * addresses in it shown as `[address]`) and the mails dead-lettered, at log level; at warn level when mail failed
   * and none went out, and, with the lanes still paused and since when the database is unavailable, while one of
   * those lasts. No line for an interval with neither. 0: none.
   * @default 60000
   */
  summaryIntervalMs?: number;
}

/**
 * Variable envelope return paths, for apps that read DSNs (bounce emails) themselves: the SMTP envelope sender
 * (MAIL FROM, where DSNs go; the header From stays the mail's own) of each recipient's copy becomes
 * `<localPart>+<token>@<domain>`, the token naming the row and carrying an HMAC of (row, recipient) under `secret`.
 * `MailFeedbackService.ingestDsn` links a DSN to its row by that address, and suppresses only the recipient it was
 * made for. Each recipient then takes an SMTP transaction of its own.
 */
export interface VerpOptions {
  /** A domain whose mail reaches a mailbox the app reads (its MX, and SPF allowing the SMTP server to send as it). */
  domain: string;
  /**
   * What comes before `+<token>`: the mailbox, when the server delivers `local+detail` addresses to `local`. At most
   * 21 characters: the token takes 43 of the local part's 64.
   * @default 'bounces'
   */
  localPart?: string;
  /**
   * The key of the tokens' HMAC, at least 32 characters (`openssl rand -base64 32`); or `[old, new]` while one
   * replaces another: addresses are signed with the last, and DSNs verify with any. Keep an old one for as long as
   * DSNs of mail sent under it may come (a few days).
   */
  secret: string | string[];
}

/**
 * Where mail goes: an SMTP URL (`smtp://user:pass@host:587`, `smtps://…`), SMTP options, or a transport object: a
 * provider's (`new SesMailTransport(…)`, `new PostmarkMailTransport(…)`, `new ResendMailTransport(…)`) or one of
 * the app's own that implements `MailTransport`.
 */
export type TransportOption = string | SmtpTransportOptions | MailTransport;

export interface LaneOptions {
  /**
   * The most sends in flight in this lane, in this instance.
   * @default `dispatcher.concurrency`
   */
  concurrency?: number;
  /**
   * The most messages per second this lane sends from this instance.
   * @default unlimited
   */
  ratePerSecond?: number;
  /**
   * While a lane of a higher priority is claiming or sending, this lane sends one mail at a time in this instance
   * (its sends under way finish): a login code does not share the CPU, the event loop and the database with a burst
   * of newsletters, and a lane above that never goes quiet slows this one without stopping it. Lanes of equal
   * priority never hold each other back. An integer from 0 to 1000.
   * @default 1 for a lane named `critical`, 0 for every other
   */
  priority?: number;
  /**
   * A transport of the lane's own (providers keep separate streams for broadcast mail).
   * @default `transport`
   */
  transport?: TransportOption;
  /**
   * The provider's limits, kept by every instance on the database together (see `LaneQuotaOptions`): a mail over
   * them is not claimed, so it is charged no attempt, and waits as in an outage until they allow it or
   * `retry.maxAgeMs` ends it. `'provider'` reads both limits from the lane's transport (SES: the account's
   * `MaxSendRate` and `Max24HourSend`).
   * @default none: only `ratePerSecond`, per instance
   */
  quota?: LaneQuotaOptions | 'provider';
  /**
   * `false` for a lane of mail a recipient may opt out of (newsletters, digests, offers): each copy carries RFC 8058
   * one-click `List-Unsubscribe` and `List-Unsubscribe-Post` headers with a link signed for its recipient (see
   * `unsubscribe`, required then), so each recipient gets a message of its own, and a recipient who unsubscribed from
   * the lane's `category` gets none of its mail (the row reports them suppressed). The mail's own `List-Unsubscribe`
   * and `List-Unsubscribe-Post` headers are replaced. A transactional lane's mail (login codes, receipts) carries no
   * such header and is never held back by an unsubscribe.
   * @default true
   */
  transactional?: boolean;
  /**
   * What a recipient of this non-transactional lane unsubscribes from: lanes that give the same category share its
   * list. Lower-case letters, digits, `_` and `-`, starting with a letter; only with `transactional: false`.
   * @default the lane's name
   */
  category?: string;
}

/** What a lane's quota counts: each recipient (SES), or each message sent. */
export type QuotaCounts = 'recipients' | 'messages';

/**
 * A provider account's limits, shared by every instance on the database: its rate and rolling 24-hour quota, and
 * the pause a provider's Retry-After asks for, which one instance reads and all honour. Each limit is a number,
 * `'provider'` to read it from the lane's transport (one that implements `sendQuota`, such as SES's), or left out
 * for none.
 */
export interface LaneQuotaOptions {
  /**
   * The most sends a second (messages or recipients, as `counts` says), all instances together: no second holds more
   * (a fraction rounds down: 14.5 lets a second hold 14). They go at 93 % of it (20 per 1,075 ms for 20), which
   * leaves room for sends that reach the provider a little unevenly.
   */
  perSecond?: number | 'provider';
  /** The most sends in a rolling 24 hours (messages or recipients, as `counts` says), all instances together. */
  perDay?: number | 'provider';
  /**
   * What the limits count, as the provider does: `'recipients'` for SES, whose rate and quota count each recipient
   * (a mail to 5 counts 5); `'messages'` for a provider that counts messages (a mail past 50 recipients, which goes
   * in several requests, counts once). A mail to several recipients takes one
   * grant and is charged the rest once claimed, so a lane may go over for a moment and then wait for it, as SES itself
   * lets such a mail through while any of the second is left. In a non-transactional lane each recipient gets a
   * message of its own: there both count each recipient.
   * @default `'recipients'` where a limit is `'provider'` (SES's), else `'messages'`
   */
  counts?: QuotaCounts;
  /**
   * The name the limits are kept under: lanes that send through one provider account give the same key (and the
   * same limits), and share them.
   * @default the lane's name
   */
  key?: string;
}

/**
 * RFC 8058 one-click unsubscribe, for the lanes marked `transactional: false`: where `ReliableMailWebhooksModule`'s
 * unsubscribe route is reached, and the key its links are signed with. A link names its recipient, the lane's
 * category and the mail, under an HMAC: it unsubscribes nobody else, from nothing else.
 */
export interface UnsubscribeOptions {
  /**
   * The route's public URL: `https://<host>/<the webhooks module's path>/unsubscribe`, such as
   * `https://example.com/webhooks/mail/unsubscribe`; each link adds `?token=…`. HTTPS, as RFC 8058 and the mailbox
   * providers require (`http:` only on a loopback host, for tests).
   */
  url: string;
  /**
   * The key of the links' HMAC, at least 32 characters (`openssl rand -base64 32`); or `[old, new]` while one
   * replaces another: links are signed with the last, and verify with any. A link signed with a key no longer given
   * stops working: keep an old key for as long as mail sent under it may be read (CAN-SPAM asks for 30 days at
   * least).
   */
  secret: string | string[];
}

export interface ReliableMailOptions {
  /** An SMTP URL (`smtp://user:pass@host:587`), SMTP options, or a transport object (see `TransportOption`). */
  transport: TransportOption;
  /**
   *
   * @default sender, used when a mail has no `from`
   */
  from: string;
  /** The right-hand side of every Message-ID (`<uuid@messageIdDomain>`). */
  messageIdDomain: string;
  dispatcher?: DispatcherOptions;
  retry?: RetryOptions;
  /**
   * Lanes, each with its own claim loop and capacity, so that a bulk backlog never delays a login code.
   *
   * @default `critical`, `default` and `bulk`, each with `dispatcher.concurrency`
   */
  lanes?: Record<string, LaneOptions>;
  /**
   * The lane of an enqueue that names none.
   * @default `default`
   */
  defaultLane?: string;
  /**
   * Templates a mail can name (`enqueue({ template, params })`), rendered at send time; several versions of a
   * name may be given. More can be added from a provider through `MailTemplateRegistry.register`. A folder of
   * template files (`fileTemplates({ dir })`) is read at start, each template versioned by its sources' hash.
   */
  templates?: Array<MailTemplate | MailTemplateFolder>;
  /**
   * The largest mail enqueue accepts, in bytes: subject, body (or template parameters), headers and inline
   * attachments (counted decoded). Referenced attachments do not count.
   * @default 5 MiB
   */
  maxMessageBytes?: number;
  /** Fetches attachments given as `{ ref }` at send time; without it such an attachment is refused at enqueue. */
  attachmentResolver?: AttachmentResolver;
  retention?: RetentionOptions;
  health?: HealthOptions;
  database?: DatabaseOptions;
  events?: EventOptions;
  /** Brokers the recorded events are published to as well (see `RelayOptions`). @default none */
  relay?: RelayOptions;
  /**
   * Envelope senders that name their row, so that DSN emails can be linked back (see `MailFeedbackService`).
   * @default none: the envelope sender is the mail's From
   */
  verp?: VerpOptions;
  /**
   * One-click unsubscribe links for the lanes marked `transactional: false` (see `UnsubscribeOptions`); required when
   * a lane is.
   * @default none: every lane is transactional
   */
  unsubscribe?: UnsubscribeOptions;
  /** What is logged, and how much (see `LoggingOptions`): by default no line per mail. */
  logging?: LoggingOptions;
  /**
   * Refuses an enqueue outside any transaction (`TransactionRequiredError`): a mail written on its own would go
   * out even if the business transaction it belongs to rolled back.
   * @default false: such an enqueue commits on its own
   */
  requireTransaction?: boolean;
}
