import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { WAKE_UP_CHANNEL } from '../reliable-mail.constants.js';
import type { OutboxAttempt, OutboxRow, OutboxRowWithAttempts, OutboxStatus } from './mail.types.js';
import { type Row, toDate, toDateOrNull } from './outbox.repository.js';

// The statements of operators, monitoring and retention, and reading a row with its attempts. The queue's own
// statements (insert, claim, settle) are in outbox.repository.ts; together the two files hold every statement
// reliable-mail runs.

/** Which rows an operator means. Every field narrows the set. */
export interface OutboxFilter {
  ids?: string[];
  status?: OutboxStatus | OutboxStatus[];
  lane?: string;
  /** An address in to, cc or bcc (case-insensitive). */
  recipient?: string;
  idempotencyKey?: string;
  /** Rows whose metadata contains this JSON (`@>`). */
  metadata?: Record<string, unknown>;
  createdAfter?: Date;
  createdBefore?: Date;
}

export interface OutboxStats extends HealthFigures {
  counts: Array<{ status: OutboxStatus; lane: string; count: number }>;
  sent: { lastMinute: number; lastHour: number };
  failed: { lastMinute: number; lastHour: number };
}

export interface HealthFigures {
  /** Rows waiting to be sent: due now, being sent, or waiting for a retry (not those scheduled for later). */
  backlog: number;
  /** How long the longest-waiting of them has waited since it was due, in milliseconds (0 when none waits). */
  lagMs: number;
  deadLetters: number;
}

export interface Suppression {
  address: string;
  reason: string;
  source: 'bounce' | 'operator';
  outboxId: string | null;
  createdAt: Date;
}

/** Statuses an operator may requeue: the final ones a fix can turn around. */
export const REQUEUABLE_STATUSES: readonly OutboxStatus[] = ['failed', 'dead', 'expired', 'cancelled'];
/** Statuses an operator may purge, and retention deletes by age: nothing is left to do for them. */
export const CLOSED_STATUSES: readonly OutboxStatus[] = [
  'sent',
  'cancelled',
  'expired',
  'suppressed',
  'failed',
  'dead',
];
const RETAINED_STATUSES = `'sent', 'cancelled', 'expired', 'suppressed'`;

/** Turns a filter into a where clause with its parameters; the SQL never holds a value. */
function whereOf(filter: OutboxFilter, alias = 'o'): { sql: string; params: unknown[] } {
  const clauses: string[] = [];
  const params: unknown[] = [];
  const add = (clause: string, ...values: unknown[]) => {
    clauses.push(clause);
    params.push(...values);
  };
  if (filter.ids) add(`${alias}.id = any(cast(? as uuid[]))`, `{${filter.ids.join(',')}}`);
  if (filter.status) add(`${alias}.status = any(cast(? as text[]))`, `{${[filter.status].flat().join(',')}}`);
  if (filter.lane) add(`${alias}.lane = ?`, filter.lane);
  if (filter.recipient) {
    add(
      `exists (select 1 from jsonb_array_elements((${alias}.payload->'to') || (${alias}.payload->'cc') || (${alias}.payload->'bcc')) r
               where lower(r->>'address') = lower(?))`,
      filter.recipient,
    );
  }
  if (filter.idempotencyKey) add(`${alias}.idempotency_key = ?`, filter.idempotencyKey);
  if (filter.metadata) add(`${alias}.metadata @> cast(? as jsonb)`, JSON.stringify(filter.metadata));
  if (filter.createdAfter) add(`${alias}.created_at >= ?`, filter.createdAfter.toISOString());
  if (filter.createdBefore) add(`${alias}.created_at < ?`, filter.createdBefore.toISOString());
  return { sql: clauses.length > 0 ? clauses.join(' and ') : 'true', params };
}

function mapOutboxRow(row: Row): OutboxRow {
  return {
    id: row.id,
    idempotencyKey: row.idempotency_key,
    messageId: row.message_id,
    status: row.status,
    lane: row.lane,
    payload: row.payload,
    metadata: row.metadata,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: toDate(row.next_attempt_at),
    expiresAt: toDateOrNull(row.expires_at),
    cancelRequestedAt: toDateOrNull(row.cancel_requested_at),
    lockedUntil: toDateOrNull(row.locked_until),
    lockedBy: row.locked_by,
    lastError: row.last_error,
    lastReplyCode: row.last_reply_code,
    lastEnhancedStatus: row.last_enhanced_status,
    providerReply: row.provider_reply,
    providerMessageId: row.provider_message_id,
    rejectedRecipients: row.rejected_recipients,
    requeuedAt: toDateOrNull(row.requeued_at),
    requeueReason: row.requeue_reason,
    createdAt: toDate(row.created_at),
    sentAt: toDateOrNull(row.sent_at),
    updatedAt: toDate(row.updated_at),
  };
}

function mapAttempt(row: Row): OutboxAttempt {
  return {
    id: row.id,
    attempt: row.attempt,
    workerId: row.worker_id,
    startedAt: toDate(row.started_at),
    finishedAt: toDateOrNull(row.finished_at),
    outcome: row.outcome,
    replyCode: row.reply_code,
    enhancedStatus: row.enhanced_status,
    reply: row.reply,
    durationMs: row.duration_ms,
  };
}

const ATTEMPT_LOG = `coalesce((select jsonb_agg(to_jsonb(a) order by a.started_at, a.attempt)
                              from mail_outbox_attempt a where a.outbox_id = o.id), '[]'::jsonb) as attempt_log`;

function withAttempts(row: Row): OutboxRowWithAttempts {
  return { ...mapOutboxRow(row), attemptLog: (row.attempt_log as Row[]).map(mapAttempt) };
}

@Injectable()
export class OutboxOperationsRepository {
  async findWithAttempts(em: EntityManager, id: string): Promise<OutboxRowWithAttempts | null> {
    const [row] = await this.list(em, { ids: [id] }, 1);
    return row ?? null;
  }

  /** Rows matching the filter, newest first, with their attempts; `before` is the id to continue after. */
  async list(
    em: EntityManager,
    filter: OutboxFilter,
    limit: number,
    before?: string,
  ): Promise<OutboxRowWithAttempts[]> {
    const where = whereOf(filter);
    const rows = await em.execute<Row[]>(
      `select o.*, ${ATTEMPT_LOG} from mail_outbox o
       where ${where.sql} ${before ? 'and o.id < ?' : ''}
       order by o.id desc limit ?`,
      [...where.params, ...(before ? [before] : []), limit],
    );
    return rows.map(withAttempts);
  }

  /**
   * Puts final rows back in the queue with their id and Message-ID: attempts start again from zero, the reason
   * is recorded, an expiry is lifted; the dispatchers of their lanes are woken when the transaction commits.
   */
  async requeue(em: EntityManager, filter: OutboxFilter, reason: string): Promise<string[]> {
    const where = whereOf(filter);
    const rows = await em.execute<Row[]>(
      `with requeued as (
         update mail_outbox o
         set status = 'pending', attempts = 0, next_attempt_at = now(), expires_at = null, cancel_requested_at = null,
             requeued_at = now(), requeue_reason = ?, updated_at = now()
         where o.status = any(cast(? as text[])) and ${where.sql}
         returning o.id, o.lane
       ), notified as (
         select pg_notify('${WAKE_UP_CHANNEL}', lane) from (select distinct lane from requeued) lanes
       )
       select id, (select count(*) from notified) as lanes_notified from requeued`,
      [reason, `{${REQUEUABLE_STATUSES.join(',')}}`, ...where.params],
    );
    return rows.map((row) => row.id as string);
  }

  /** Deletes closed rows (and their attempts) matching the filter; returns how many. */
  async purge(em: EntityManager, filter: OutboxFilter): Promise<number> {
    const where = whereOf(filter);
    const rows = await em.execute<Row[]>(
      `delete from mail_outbox o where o.status = any(cast(? as text[])) and ${where.sql} returning o.id`,
      [`{${CLOSED_STATUSES.join(',')}}`, ...where.params],
    );
    return rows.length;
  }

  /** Up to `limit` rows created in [from, to) after the id `after`, oldest first, with attempts: one export page. */
  async exportPage(
    em: EntityManager,
    from: Date,
    to: Date,
    limit: number,
    after?: string,
  ): Promise<OutboxRowWithAttempts[]> {
    const rows = await em.execute<Row[]>(
      `select o.*, ${ATTEMPT_LOG} from mail_outbox o
       where o.created_at >= ? and o.created_at < ? ${after ? 'and o.id > ?' : ''}
       order by o.id limit ?`,
      [from.toISOString(), to.toISOString(), ...(after ? [after] : []), limit],
    );
    return rows.map(withAttempts);
  }

  /**
   * Deletes one batch of sent, cancelled, expired and suppressed rows last changed before the cut-off. Rows another
   * session holds are skipped, so retention never waits on the dispatchers; failed and dead rows stay.
   */
  async deleteRetained(em: EntityManager, olderThanMs: number, batchSize: number): Promise<number> {
    const rows = await em.execute<Row[]>(
      `delete from mail_outbox where id in (
         select id from mail_outbox
         where status in (${RETAINED_STATUSES}) and updated_at < now() - ? * interval '1 millisecond'
         order by updated_at limit ? for update skip locked
       ) returning id`,
      [olderThanMs, batchSize],
    );
    return rows.length;
  }

  /** Everything `stats()` shows. Counting by status reads the whole table: an operator's query, not a probe's. */
  async stats(em: EntityManager): Promise<OutboxStats> {
    const [[row], figures] = await Promise.all([
      em.execute<Row[]>(
        `select
           (select coalesce(jsonb_agg(c order by c.status, c.lane), '[]'::jsonb)
            from (select status, lane, count(*)::int as count from mail_outbox group by status, lane) c) as counts,
           (select count(*)::int from mail_outbox where status = 'sent' and updated_at > now() - interval '1 minute') as sent_minute,
           (select count(*)::int from mail_outbox where status = 'sent' and updated_at > now() - interval '1 hour') as sent_hour,
           (select count(*)::int from mail_outbox where status in ('failed', 'dead') and updated_at > now() - interval '1 minute') as failed_minute,
           (select count(*)::int from mail_outbox where status in ('failed', 'dead') and updated_at > now() - interval '1 hour') as failed_hour`,
      ),
      this.healthFigures(em, 3_600_000),
    ]);
    return {
      counts: row.counts,
      ...figures,
      sent: { lastMinute: row.sent_minute, lastHour: row.sent_hour },
      failed: { lastMinute: row.failed_minute, lastHour: row.failed_hour },
    };
  }

  /**
   * What a health probe needs, from the open rows' indexes. A row waits since its first due time: its
   * `next_attempt_at` before any attempt, its creation (or last requeue) once it is being retried.
   */
  async healthFigures(em: EntityManager, deadLetterWindowMs: number): Promise<HealthFigures> {
    const [row] = await em.execute<Row[]>(
      `select count(*)::int as backlog,
              coalesce(extract(epoch from now() - min(waiting_since)) * 1000, 0)::bigint as lag_ms,
              (select count(*)::int from mail_outbox
               where status = 'dead' and updated_at > now() - ? * interval '1 millisecond') as dead_letters
       from (
         select case when attempts = 0 then next_attempt_at else coalesce(requeued_at, created_at) end as waiting_since
         from mail_outbox where status = 'pending' and (attempts > 0 or next_attempt_at <= now())
         union all
         select coalesce(requeued_at, created_at) from mail_outbox where status = 'sending'
       ) open_rows`,
      [deadLetterWindowMs],
    );
    return { backlog: row.backlog, lagMs: Number(row.lag_ms), deadLetters: row.dead_letters };
  }

  /** Rows by status and lane, for the metrics gauges: the open statuses and the problems, from indexes. */
  async openCounts(em: EntityManager): Promise<Array<{ status: OutboxStatus; lane: string; count: number }>> {
    return em.execute(
      `select status, lane, count(*)::int as count from mail_outbox
       where status in ('pending', 'sending', 'failed', 'dead') group by status, lane`,
    );
  }

  async listSuppressions(em: EntityManager, limit: number, after?: string): Promise<Suppression[]> {
    const rows = await em.execute<Row[]>(
      `select * from mail_suppression ${after ? 'where address > ?' : ''} order by address limit ?`,
      [...(after ? [after] : []), limit],
    );
    return rows.map((row) => ({
      address: row.address,
      reason: row.reason,
      source: row.source,
      outboxId: row.outbox_id,
      createdAt: toDate(row.created_at),
    }));
  }

  async addSuppression(em: EntityManager, address: string, reason: string): Promise<void> {
    await em.execute(
      `insert into mail_suppression (address, reason, source) values (?, ?, 'operator')
       on conflict (address) do update set reason = excluded.reason, source = 'operator'`,
      [address, reason],
    );
  }

  async removeSuppression(em: EntityManager, address: string): Promise<boolean> {
    const rows = await em.execute<Row[]>(`delete from mail_suppression where address = ? returning address`, [address]);
    return rows.length > 0;
  }
}
