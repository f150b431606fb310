import { Inject, Injectable } from '@nestjs/common';
import { OutboxDatabase } from '../database/outbox-database.js';
import {
  IdempotencyConflictError,
  MailValidationError,
  OutboxRowNotCancellableError,
  OutboxRowNotFoundError,
  TransactionRequiredError,
} from '../errors.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { MailTemplateRegistry } from '../templates/mail-template.registry.js';
import type { EnqueueOptions, EnqueueResult, OutboxRowWithAttempts, OutboxStatus, OutgoingMail } from './mail.types.js';
import { contentHashOf } from './validation/content-hash.js';
import type { MailContentRules } from './validation/content-rules.js';
import { checkStorable, toJsonValue } from './validation/json.js';
import { toMailPayload } from './validation/payload.js';
import type { InsertedRow, NewOutboxRow } from './queue.types.js';
import { cancelRow } from './sql/cancel.js';
import { findByIdempotencyKeys, insertRows } from './sql/insert.js';
import { listRows } from './sql/list.js';
import type { SqlClient } from '../database/sql-client.js';
import { OutboxSchema } from '../schema/outbox-schema.js';
import { type CallerTransaction, inTransaction, statementsIn } from '../transactions/caller-transaction.js';
import { CallerTransactions } from '../transactions/caller-transactions.js';
import { uuidv7 } from './uuid-v7.js';
import { WakeUpNotifier, type WakeUpPlan } from './wake-up.notifier.js';
import { isUuid } from '../shared/uuid.js';
import { isStorableDate } from '../database/storable.js';
import { activeTraceContext, type StoredTraceContext } from '../shared/trace-context.js';

const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Options shared by every mail of one `enqueueMany` call. */
export type EnqueueManyOptions = Omit<EnqueueOptions, 'idempotencyKey'>;

/** Where `cancel` and `get` run. */
export interface TransactionOption {
  /** The caller's transaction, as for `enqueue`; by default the one the calling code runs in, if any. */
  tx?: unknown;
}

/** One mail of `enqueueMany`, with the key that makes it idempotent. */
export interface BatchMail {
  mail: OutgoingMail;
  idempotencyKey?: string;
}

// A date PostgreSQL refuses would fail the insert and abort the caller's transaction with it: one before 4713 BC
// ("timestamp out of range"), one outside the years 1-9999 in enqueueMany's JSON (`+010000-…`, `0000-…`), or an
// Invalid Date, which `delayMs: 1e16` makes (past JavaScript's 8.64e15 ms). Refused here instead, before any SQL.
const STORABLE_YEARS = 'within the years 1 to 9999';

function optionalDate(field: string, value: unknown): Date | null {
  if (value === undefined) return null;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new MailValidationError(field, 'must be a valid Date');
  }
  if (!isStorableDate(value)) throw new MailValidationError(field, `must be a Date ${STORABLE_YEARS}`);
  return value;
}

function optionalDuration(field: string, value: unknown, now: number): Date | null {
  if (value === undefined) return null;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new MailValidationError(field, 'must be a number of milliseconds >= 0');
  }
  const at = new Date(now + value);
  if (!isStorableDate(at)) {
    throw new MailValidationError(field, `must end ${STORABLE_YEARS}: ${value} ms from now is past the year 9999`);
  }
  return at;
}

function exclusive(options: EnqueueOptions, first: keyof EnqueueOptions, second: keyof EnqueueOptions): void {
  if (options[first] !== undefined && options[second] !== undefined) {
    throw new MailValidationError(second, `cannot be given together with ${first}`);
  }
}

@Injectable()
export class MailOutboxService {
  private readonly lanes: Set<string>;
  private readonly contentRules: MailContentRules;

  constructor(
    private readonly transactions: CallerTransactions,
    private readonly database: OutboxDatabase,
    private readonly schema: OutboxSchema,
    private readonly wakeUp: WakeUpNotifier,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    templates: MailTemplateRegistry,
  ) {
    this.lanes = new Set(options.lanes.map((lane) => lane.name));
    this.contentRules = {
      templates,
      maxMessageBytes: options.maxMessageBytes,
      resolvesReferences: options.attachmentResolver !== null,
    };
  }

  /**
   * Writes a mail into the outbox, in the caller's transaction: the row exists, and is sent, only if that
   * transaction commits. The transaction is `options.tx` (see `EnqueueOptions.tx`), else the one the calling code
   * runs in (`@Transactional()` of @nestjs-cls/transactional, or MikroORM's `em.transactional()`); with none, the
   * row commits on its own, unless `requireTransaction` is set. Validation happens before anything is written.
   */
  async enqueue(mail: OutgoingMail, options: EnqueueOptions = {}): Promise<EnqueueResult> {
    const rows = this.prepare([{ mail, idempotencyKey: options.idempotencyKey }], options);
    const traceContext = activeTraceContext();
    const tables = await this.schema.tables();
    const transaction = await this.joined(options);
    const [result] = transaction
      ? await this.write(rows, traceContext, statementsIn(transaction, tables), this.wakeUp.plan(transaction))
      : await this.write(rows, traceContext, this.database, this.wakeUp.plan(null));
    return result;
  }

  /**
   * Writes many mails in one statement, with the rules of `enqueue` for each. Every mail is validated before
   * anything is written, and an idempotency conflict throws with nothing of the batch kept: inside a caller's
   * transaction that transaction is rolled back by the throw, outside one the batch runs in its own.
   */
  async enqueueMany(mails: BatchMail[], options: EnqueueManyOptions = {}): Promise<EnqueueResult[]> {
    if (!Array.isArray(mails)) throw new MailValidationError('mails', 'must be an array');
    if (mails.length === 0) return [];
    const rows = this.prepare(mails, options);
    const traceContext = activeTraceContext();
    const tables = await this.schema.tables();
    const transaction = await this.joined(options, true);
    if (transaction)
      return this.write(rows, traceContext, statementsIn(transaction, tables), this.wakeUp.plan(transaction));
    return this.writeInOwnTransaction(rows, traceContext);
  }

  /**
   * The caller's transaction an enqueue joins, or null to write on reliable-mail's own connection (called once the
   * start is done, which found the app's ambient transactions). A client that could not tell whether it is in one
   * (plain pg) is asked of the server when it matters: where no transaction is allowed, and for a batch, which must
   * not commit in part.
   */
  private async joined(options: EnqueueOptions, batch = false): Promise<CallerTransaction | null> {
    const transaction = this.transactions.of(options.tx ?? options.em, this.wakeUp);
    const { requireTransaction } = this.options;
    if (transaction && (requireTransaction || batch) && !(await inTransaction(transaction))) {
      if (requireTransaction) throw new TransactionRequiredError();
      return null;
    }
    if (!transaction && requireTransaction) throw new TransactionRequiredError();
    return transaction;
  }

  /**
   * A batch outside any caller's transaction runs in one of reliable-mail's own. Counted as an open enqueue until it
   * commits, and the dispatchers are woken after the commit.
   */
  private async writeInOwnTransaction(
    rows: NewOutboxRow[],
    traceContext: StoredTraceContext,
  ): Promise<EnqueueResult[]> {
    const wakeUp = this.wakeUp.plan(null);
    let lanes: string[] = [];
    const beforeCommit: WakeUpPlan = {
      inStatement: wakeUp.inStatement,
      inserted: (inserted) => (lanes = [...inserted]),
      abandoned: () => undefined,
    };
    let results: EnqueueResult[];
    try {
      results = await this.database.transaction((client) => this.write(rows, traceContext, client, beforeCommit));
    } catch (error) {
      wakeUp.abandoned();
      throw error;
    }
    wakeUp.inserted(lanes);
    return results;
  }

  /**
   * Stops a mail that is not yet final, in the caller's transaction if there is one (so that it is stopped only if
   * that commits). A pending one is cancelled at once; one being sent finishes its attempt and is then not retried.
   * Cancelling a final mail (sent, failed, dead, expired, suppressed) throws.
   */
  async cancel(id: string, options: TransactionOption = {}): Promise<{ id: string; status: OutboxStatus }> {
    const status = isUuid(id) ? await cancelRow(await this.statements(options), id) : null;
    if (status === null) throw new OutboxRowNotFoundError(id);
    if (status !== 'cancelled' && status !== 'sending') throw new OutboxRowNotCancellableError(id, status);
    return { id, status };
  }

  /** The row and every attempt made to send it (as the caller's transaction sees it, if there is one). */
  async get(id: string, options: TransactionOption = {}): Promise<OutboxRowWithAttempts> {
    const [row] = isUuid(id) ? await listRows(await this.statements(options), { ids: [id] }, 1) : [];
    if (!row) throw new OutboxRowNotFoundError(id);
    return row;
  }

  /** Where a call that is not an enqueue runs: the caller's transaction, or reliable-mail's own connections. */
  async statements(options: TransactionOption = {}): Promise<SqlClient> {
    const tables = await this.schema.tables();
    const transaction = this.transactions.of(options.tx, this.wakeUp);
    return transaction ? statementsIn(transaction, tables) : this.database;
  }

  /** Writes the rows with the trace context of the enqueue, which its send and feedback spans continue. */
  private async write(
    rows: NewOutboxRow[],
    traceContext: StoredTraceContext,
    client: SqlClient,
    wakeUp: WakeUpPlan,
  ): Promise<EnqueueResult[]> {
    let inserted: InsertedRow[];
    try {
      inserted = await insertRows(client, rows, wakeUp.inStatement, traceContext);
    } catch (error) {
      wakeUp.abandoned();
      throw error;
    }
    wakeUp.inserted(rows.map((row) => row.lane));
    const byId = new Map<string, InsertedRow>(inserted.map((row) => [row.id, row]));
    const missingKeys = rows.filter((row) => !byId.has(row.id)).map((row) => row.idempotencyKey!);
    const existing = new Map(
      (await findByIdempotencyKeys(client, [...new Set(missingKeys)])).map((row) => [row.idempotencyKey, row]),
    );
    return rows.map((row) => {
      const stored = byId.get(row.id) ?? existing.get(row.idempotencyKey);
      if (!stored) {
        throw new IdempotencyConflictError(row.idempotencyKey!, 'a row that was deleted meanwhile');
      }
      if (stored.contentHash !== row.contentHash) {
        throw new IdempotencyConflictError(row.idempotencyKey!, stored.id);
      }
      return { id: stored.id, messageId: stored.messageId, status: stored.status, created: stored.created };
    });
  }

  /** Validates every mail and turns it into a row; throws on the first problem, before anything is written. */
  private prepare(mails: BatchMail[], options: EnqueueOptions): NewOutboxRow[] {
    const { metadata, lane = this.options.defaultLane } = options;
    if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
      throw new MailValidationError('metadata', 'must be a plain object of JSON values');
    }
    if (typeof lane !== 'string' || !this.lanes.has(lane)) {
      throw new MailValidationError(
        'lane',
        `names no declared lane: ${JSON.stringify(lane)} (lanes: ${[...this.lanes].join(', ')})`,
      );
    }
    exclusive(options, 'sendAt', 'delayMs');
    exclusive(options, 'expiresAt', 'ttlMs');
    const now = Date.now();
    const notBefore = optionalDate('sendAt', options.sendAt) ?? optionalDuration('delayMs', options.delayMs, now);
    const expiresAt = optionalDate('expiresAt', options.expiresAt) ?? optionalDuration('ttlMs', options.ttlMs, now);
    if (expiresAt && expiresAt.getTime() <= Math.max(now, notBefore?.getTime() ?? now)) {
      throw new MailValidationError('expiresAt', 'must be later than now and than sendAt');
    }
    const storedMetadata =
      metadata === undefined ? null : (toJsonValue('metadata', metadata) as Record<string, unknown>);

    const seen = new Map<string, NewOutboxRow>();
    return mails.map(({ mail, idempotencyKey }, index) => {
      const field = mails.length > 1 ? `mails[${index}].` : '';
      if (
        idempotencyKey !== undefined &&
        (typeof idempotencyKey !== 'string' ||
          idempotencyKey.length === 0 ||
          idempotencyKey.length > MAX_IDEMPOTENCY_KEY_LENGTH)
      ) {
        throw new MailValidationError(
          `${field}idempotencyKey`,
          `must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`,
        );
      }
      if (idempotencyKey !== undefined) checkStorable(`${field}idempotencyKey`, idempotencyKey);
      let payload;
      try {
        payload = toMailPayload(mail, this.options.from, this.contentRules);
      } catch (error) {
        if (error instanceof MailValidationError && field)
          throw new MailValidationError(`${field}${error.field}`, error.reason);
        throw error;
      }
      const id = uuidv7();
      const row: NewOutboxRow = {
        id,
        idempotencyKey: idempotencyKey ?? null,
        contentHash: null,
        messageId: `<${id}@${this.options.messageIdDomain}>`,
        payload,
        metadata: storedMetadata,
        maxAttempts: this.options.retry.maxAttempts,
        lane,
        notBefore,
        expiresAt,
      };
      if (idempotencyKey !== undefined) {
        row.contentHash = contentHashOf(row.payload, row.lane);
        const twin = seen.get(idempotencyKey);
        if (twin && twin.contentHash !== row.contentHash)
          throw new IdempotencyConflictError(idempotencyKey, 'an earlier mail of this batch');
        seen.set(idempotencyKey, row);
      }
      return row;
    });
  }
}
