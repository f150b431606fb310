/** Base class of every error reliable-mail throws on purpose, so a caller can catch them as one family. */
export class ReliableMailError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The mail given to `enqueue` cannot be sent as it is; nothing was written. */
export class MailValidationError extends ReliableMailError {
  constructor(
    /** The path of the offending field, such as `to[1]` or `subject`. */
    readonly field: string,
    readonly reason: string,
  ) {
    super(`Invalid mail: ${field} ${reason}`);
  }
}

/**
 * An operator's filter, page or period (`MailOutboxAdmin`) that would not select the rows it names: a field that
 * narrows nothing once serialised (`{ metadata: { orderId: undefined } }` is `{}`, which contains every row), text
 * or a date PostgreSQL cannot store, a cursor that is no row id. Nothing was read or changed. A
 * `MailValidationError`, so a catch written for that one still takes it.
 */
export class OutboxFilterError extends MailValidationError {
  constructor(field: string, reason: string) {
    super(field, reason);
    this.message = `Invalid filter: ${field} ${reason}`;
  }
}

/** An idempotency key was reused with different content; the existing row is left as it was. */
export class IdempotencyConflictError extends ReliableMailError {
  constructor(
    readonly idempotencyKey: string,
    readonly existingId: string,
  ) {
    super(`Idempotency key "${idempotencyKey}" is already used by outbox row ${existingId} with different content`);
  }
}

/** The module was configured with an option it cannot work with; raised at start-up. */
export class InvalidOptionsError extends ReliableMailError {
  constructor(
    readonly option: string,
    readonly reason: string,
    module = 'ReliableMailModule',
  ) {
    super(`Invalid ${module} option "${option}": ${reason}`);
  }
}

/** No outbox row has the given id. */
export class OutboxRowNotFoundError extends ReliableMailError {
  constructor(readonly id: string) {
    super(`No outbox row with id ${id}`);
  }
}

/** The row is already final (sent, failed, dead, expired or suppressed): there is nothing left to cancel. */
export class OutboxRowNotCancellableError extends ReliableMailError {
  constructor(
    readonly id: string,
    readonly status: string,
  ) {
    super(`Outbox row ${id} is ${status} and can no longer be cancelled`);
  }
}

/** A webhook's signature (or credentials) did not verify: nothing of it was stored. Answered 401. */
export class FeedbackSignatureError extends ReliableMailError {
  constructor(readonly reason: string) {
    super(`Feedback refused: ${reason}`);
  }
}

/** A verified webhook (or a DSN) whose content cannot be read as feedback: nothing of it was stored. Answered 400. */
export class FeedbackPayloadError extends ReliableMailError {
  constructor(readonly reason: string) {
    super(`Malformed feedback: ${reason}`);
  }
}

/**
 * A webhook could not be checked now, through no fault of its sender (the SNS signing certificate could not be had,
 * or too many are being fetched at once): nothing of it was stored, and a retry later may succeed. Answered 503.
 */
export class FeedbackUnavailableError extends ReliableMailError {
  constructor(readonly reason: string) {
    super(`Feedback cannot be checked now: ${reason}`);
  }
}

/** `MailFeedbackService.ingest` was given a source that no `ReliableMailWebhooksModule` configured. */
export class UnknownFeedbackSourceError extends ReliableMailError {
  constructor(readonly source: string) {
    super(`No feedback source "${source}" is configured`);
  }
}

/**
 * An optional peer dependency is not installed in the app, though something configured needs it: a provider
 * transport's SDK, a webhook source's verifier, mailparser for DSNs. `usedBy` names what needs it.
 */
export class MissingPeerDependencyError extends ReliableMailError {
  constructor(
    readonly packageName: string,
    readonly usedBy: string,
  ) {
    super(`${usedBy} needs the package ${packageName}: npm install ${packageName}`);
  }
}

/**
 * An enqueue outside any transaction while `requireTransaction` is set: a mail written outside the business
 * transaction would go out even if that transaction rolled back. Nothing was written.
 */
export class TransactionRequiredError extends ReliableMailError {
  constructor() {
    super(
      'reliable-mail is set to requireTransaction, and this enqueue runs in no transaction: call it inside the ' +
        "business transaction, or pass that transaction as { tx } (MikroORM's or TypeORM's EntityManager, a TypeORM " +
        "QueryRunner, Prisma's, Drizzle's or Kysely's transaction, a pg client after BEGIN)",
    );
  }
}

/**
 * The app is set up in a way reliable-mail cannot run in: the message says what is missing and how to fix it. Thrown
 * at start (`app.init()`, `NestFactory.create`), so that a wrong setup fails at once rather than at the first mail.
 */
export class ReliableMailSetupError extends ReliableMailError {}
