import { createHash } from 'node:crypto';
import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable } from '@nestjs/common';
import { v7 as uuidv7 } from 'uuid';
import { MailValidationError, IdempotencyConflictError, OutboxRowNotFoundError, ReliableMailError } from '../errors.js';
import { RESOLVED_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../reliable-mail.options.js';
import type { EnqueueOptions, EnqueueResult, MailPayload, OutboxRowWithAttempts, OutgoingMail } from './mail.types.js';
import { toMailPayload } from './mail-validation.js';
import { OutboxRepository } from './outbox.repository.js';

const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function checkOptions(options: EnqueueOptions): void {
  const { idempotencyKey, metadata } = options;
  if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0 || idempotencyKey.length > MAX_IDEMPOTENCY_KEY_LENGTH)) {
    throw new MailValidationError('idempotencyKey', `must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  }
  if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw new MailValidationError('metadata', 'must be a plain object of JSON values');
  }
}

/** A stable fingerprint of what the mail says, to tell a retried enqueue from a different mail under the same key. */
function contentHashOf(payload: MailPayload): string {
  return createHash('sha256').update(JSON.stringify(payload)).digest('base64url');
}

@Injectable()
export class MailOutboxService {
  constructor(
    private readonly em: EntityManager,
    private readonly repository: OutboxRepository,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {}

  /**
   * Writes a mail into the outbox. Inside `em.transactional()` or a `@Transactional()` method the row joins that
   * transaction (it exists, and is sent, only if the transaction commits); with `options.em` it uses that
   * EntityManager's transaction; otherwise it commits on its own. Validation happens before anything is written.
   */
  async enqueue(mail: OutgoingMail, options: EnqueueOptions = {}): Promise<EnqueueResult> {
    checkOptions(options);
    const payload = toMailPayload(mail, this.options.from);
    const metadata = options.metadata === undefined ? null : (JSON.parse(JSON.stringify(options.metadata)) as Record<string, unknown>);
    const em = options.em ?? this.em;
    const id = uuidv7();
    const contentHash = contentHashOf(payload);
    const inserted = await this.repository.insert(em, {
      id,
      idempotencyKey: options.idempotencyKey ?? null,
      contentHash,
      messageId: `<${id}@${this.options.messageIdDomain}>`,
      payload,
      metadata,
      maxAttempts: this.options.retry.maxAttempts,
    });
    const row = inserted ?? (options.idempotencyKey ? await this.repository.findByIdempotencyKey(em, options.idempotencyKey) : null);
    if (!row) {
      throw new ReliableMailError(`The outbox row for idempotency key "${options.idempotencyKey}" was deleted while it was enqueued`);
    }
    if (row.contentHash !== contentHash) {
      throw new IdempotencyConflictError(options.idempotencyKey!, row.id);
    }
    return { id: row.id, messageId: row.messageId, status: row.status, created: row.created };
  }

  /** The row and every attempt made to send it. */
  async get(id: string): Promise<OutboxRowWithAttempts> {
    const row = UUID_PATTERN.test(id) ? await this.repository.findWithAttempts(this.em, id) : null;
    if (!row) throw new OutboxRowNotFoundError(id);
    return row;
  }
}
