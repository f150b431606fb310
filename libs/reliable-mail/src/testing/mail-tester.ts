import type { INestApplicationContext } from '@nestjs/common';
import { MailOutboxAdmin } from '../admin/mail-outbox-admin.js';
import { ReliableMailSetupError } from '../errors.js';
import type { DrainReport } from '../dispatch/due-drain.js';
import { MailDispatcher } from '../dispatch/mail.dispatcher.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import { databaseClock } from './sql/database-clock.js';
import type { OutboxFilter } from '../outbox/operations.types.js';
import type { MailAddress, MailTransport } from '../transport/mail-transport.interface.js';
import type { OutboxRowWithAttempts, OutboxStatus } from '../outbox/mail.types.js';
import { MAIL_TRANSPORTS } from '../reliable-mail.constants.js';
import { parseReply } from '../transport/smtp/smtp-reply.js';
import { type CapturedMail, CapturingTransport } from './capturing.transport.js';

/** The most rows `enqueued` reads: a test that enqueues more asks for them by a narrower match. */
const ENQUEUED_READ_LIMIT = 1_000;

/** What a test looks for in what was enqueued; every field given must match. A string matches exactly. */
export interface EnqueuedMatch {
  /** An address among the recipients (to, cc, bcc), case-insensitively. */
  to?: string | RegExp;
  /** The subject given at enqueue (a template's is rendered at send: match `template` instead). */
  subject?: string | RegExp;
  /** The template's name. */
  template?: string;
  lane?: string;
  status?: OutboxStatus | OutboxStatus[];
  /** Metadata that the row's contains. */
  metadata?: Record<string, unknown>;
}

/** What a test looks for in what was sent; every field given must match. A string matches exactly. */
export interface SentMatch {
  /** An address among the recipients (to, cc, bcc), case-insensitively. */
  to?: string | RegExp;
  subject?: string | RegExp;
  /** The text or the html. */
  body?: string | RegExp;
  lane?: string;
}

const ENQUEUED_FIELDS = new Set(['to', 'subject', 'template', 'lane', 'status', 'metadata']);
const SENT_FIELDS = new Set(['to', 'subject', 'body', 'lane']);

/** A field the call cannot match on would be ignored, and the expectation met by any mail: refused instead. */
function checkFields(match: object, fields: Set<string>, call: string): void {
  const unknown = Object.keys(match).filter((key) => !fields.has(key));
  if (unknown.length > 0) {
    throw new TypeError(`${call} cannot match on ${unknown.join(', ')}; it matches on ${[...fields].join(', ')}`);
  }
}

/** An expectation on mail that was not met; its message lists what there was. */
export class MailExpectationError extends Error {
  override name = 'MailExpectationError';
}

function matches(pattern: string | RegExp | undefined, value: string | undefined, caseless = false): boolean {
  if (pattern === undefined) return true;
  if (value === undefined) return false;
  if (pattern instanceof RegExp) return pattern.test(value);
  return caseless ? pattern.toLowerCase() === value.toLowerCase() : pattern === value;
}

const anyAddress = (pattern: string | RegExp | undefined, addresses: MailAddress[]) =>
  pattern === undefined || addresses.some(({ address }) => matches(pattern, address, true));

const describeMatch = (match: EnqueuedMatch | SentMatch) =>
  JSON.stringify(match, (_, value: unknown) => (value instanceof RegExp ? String(value) : value));

const addresses = (list: MailAddress[]) => list.map(({ address }) => address).join(', ');

/**
 * Assertions on an app's mail in its own tests, with the real outbox: what its code enqueued (read from the
 * database, in the app's transactions' outcome), and what went out once the test drains the outbox through the
 * capturing transport. The app's testing module is built with `withMailCapture`; nothing is sent over a network
 * and no timer is left running.
 *
 * ```ts
 * const mail = MailTester.of(app);
 * await mail.reset();
 * await request(app.getHttpServer()).post('/orders').send(order).expect(201);
 * await mail.expectEnqueued({ to: 'ann@example.com', template: 'order-confirmation' });
 * await mail.drain();
 * expect(mail.expectSent({ to: 'ann@example.com' }).subject).toBe('Order 1 confirmed');
 * ```
 */
export class MailTester {
  private since: Date | undefined;

  private constructor(
    private readonly admin: MailOutboxAdmin,
    private readonly dispatcher: MailDispatcher,
    private readonly database: OutboxDatabase,
    /** The transport every lane sends to: its `captured` list, in order. */
    readonly transport: CapturingTransport,
  ) {}

  /** The tester of an app (or application context) whose testing module was built with `withMailCapture`. */
  static of(app: INestApplicationContext): MailTester {
    const transports = app.get<Map<string, MailTransport>>(MAIL_TRANSPORTS, { strict: false });
    const transport = [...transports.values()].find((candidate) => candidate instanceof CapturingTransport);
    if (!transport) {
      throw new ReliableMailSetupError(
        'MailTester.of(app) needs an app whose testing module was built with withMailCapture(Test.createTestingModule(…))',
      );
    }
    return new MailTester(
      app.get(MailOutboxAdmin, { strict: false }),
      app.get(MailDispatcher, { strict: false }),
      app.get(OutboxDatabase, { strict: false }),
      transport,
    );
  }

  /**
   * From now on the tester sees only mail enqueued and sent after this call (rows already in the database stay
   * there), and scripted answers are forgotten. Call it in a `beforeEach` when tests share a database. The line is
   * drawn on the database's clock, which stamps the rows.
   */
  async reset(): Promise<void> {
    this.transport.clear();
    this.since = await databaseClock(this.database);
  }

  /** The rows enqueued (since `reset`) that match, newest first. */
  async enqueued(match: EnqueuedMatch = {}): Promise<OutboxRowWithAttempts[]> {
    checkFields(match, ENQUEUED_FIELDS, 'enqueued');
    const filter: OutboxFilter = {};
    if (this.since) filter.createdAfter = this.since;
    if (match.lane !== undefined) filter.lane = match.lane;
    if (match.status !== undefined) filter.status = match.status;
    if (match.metadata !== undefined) filter.metadata = match.metadata;
    const rows = await this.admin.list(filter, { limit: ENQUEUED_READ_LIMIT });
    return rows.filter(({ payload }) => {
      const template = 'template' in payload ? payload.template?.name : undefined;
      return (
        anyAddress(match.to, [...payload.to, ...payload.cc, ...payload.bcc]) &&
        matches(match.subject, payload.subject) &&
        matches(match.template, template)
      );
    });
  }

  /** The newest enqueued row that matches; throws, listing what was enqueued, when none does. */
  async expectEnqueued(match: EnqueuedMatch = {}): Promise<OutboxRowWithAttempts> {
    const [row] = await this.enqueued(match);
    if (row) return row;
    const all = await this.enqueued();
    const seen = all.map(
      ({ payload, lane, status }) =>
        `  ${status} in ${lane}: to ${addresses(payload.to)}; ` +
        ('template' in payload && payload.template
          ? `template ${payload.template.name}`
          : `subject ${JSON.stringify(payload.subject)}`),
    );
    throw new MailExpectationError(
      `No enqueued mail matches ${describeMatch(match)}; ` +
        (seen.length > 0 ? `enqueued:\n${seen.join('\n')}` : 'nothing was enqueued'),
    );
  }

  /**
   * Sends every mail due now through the capturing transport, as the dispatcher would (rendering, settling,
   * events), and resolves once their events' listeners have run. Mail scheduled for later, or deferred to a retry
   * by a scripted answer, stays pending.
   */
  drain(): Promise<DrainReport> {
    return this.dispatcher.drain();
  }

  /** The messages sent (since `reset`) that match, in the order they were sent. */
  sent(match: SentMatch = {}): CapturedMail[] {
    checkFields(match, SENT_FIELDS, 'sent');
    return this.transport.captured.filter(
      (mail) =>
        anyAddress(match.to, [...mail.to, ...mail.cc, ...mail.bcc]) &&
        matches(match.subject, mail.subject) &&
        (match.body === undefined || matches(match.body, mail.text) || matches(match.body, mail.html)) &&
        matches(match.lane, mail.lane),
    );
  }

  /** The last sent message that matches; throws, listing what was sent, when none does. */
  expectSent(match: SentMatch = {}): CapturedMail {
    const found = this.sent(match);
    if (found.length > 0) return found[found.length - 1];
    const seen = this.transport.captured.map(
      (mail) => `  to ${addresses([...mail.to, ...mail.cc, ...mail.bcc])}: ${JSON.stringify(mail.subject)}`,
    );
    throw new MailExpectationError(
      `No sent mail matches ${describeMatch(match)}; ` +
        (seen.length > 0 ? `sent:\n${seen.join('\n')}` : 'nothing was sent (did the test call drain()?)'),
    );
  }

  /**
   * The recipient's server refuses it from now on: its mail fails (or is sent to the other recipients only). The
   * reply's code and enhanced status count as a server's: a 5.1.1 (the default) puts the address on the suppression
   * list, a `550 5.7.1 …` does not.
   */
  refuse(address: string, reply = '550 5.1.1 mailbox unavailable'): void {
    this.transport.answer(address, { status: 'refused', ...parseReply(reply) });
  }

  /** The recipient's server defers it from now on: its mail stays pending, for a retry. */
  defer(address: string, reply = '451 4.2.0 try again later'): void {
    this.transport.answer(address, { status: 'deferred', ...parseReply(reply) });
  }
}
