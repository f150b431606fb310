import type { EntityManager } from '@mikro-orm/postgresql';
import { CompiledQuery } from 'kysely';
import type { Pool } from 'pg';
import { Injectable } from '@nestjs/common';
import { WAKE_UP_CHANNEL } from '../reliable-mail.constants.js';
import type { AttemptOutcome, MailPayload, OutboxStatus, RejectedRecipient } from './mail.types.js';

// The queue's statements live in this file (the operators' are in outbox-operations.repository.ts). Values are
// bound parameters, never text spliced into the SQL: a batch's JSON goes to the server as one parameter. The
// dispatcher's statements are also named, so each connection plans them once.

export interface NewOutboxRow {
  id: string;
  idempotencyKey: string | null;
  /** Set when there is an idempotency key: what a later enqueue with that key is compared with. */
  contentHash: string | null;
  messageId: string;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  maxAttempts: number;
  lane: string;
  notBefore: Date | null;
  expiresAt: Date | null;
}

export interface InsertedRow {
  idempotencyKey: string | null;
  id: string;
  messageId: string;
  status: OutboxStatus;
  contentHash: string | null;
  created: boolean;
}

export interface ClaimedRow {
  id: string;
  messageId: string;
  idempotencyKey: string | null;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  attempts: number;
  maxAttempts: number;
  /** Where the row's age (`retry.maxAgeMs`) counts from: its last requeue, or its creation. */
  ageFrom: Date;
  lane: string;
  expiresAt: Date | null;
  lockToken: string;
  /** Null when the row is claimed only to be closed without a send (see `skipReason`). */
  attemptId: string | null;
  /**
   * Why the row must not be sent: cancelled while it was being sent, expired, every recipient suppressed, or dead
   * (its lease ran out once more with no attempt or no age left: a message that takes its worker down each time).
   */
  skipReason: 'cancelled' | 'expired' | 'suppressed' | 'dead' | null;
  /** Recipients on the suppression list, lower case; the send leaves them out. */
  suppressed: string[];
}

/** The final word on one claimed row: its new state, the attempt's record and the event to emit. */
export interface Settlement {
  id: string;
  lockToken: string;
  attemptId: string | null;
  status: Exclude<OutboxStatus, 'sending'>;
  /** 1 when this attempt must not count against the row (the sender's fault). */
  refundAttempt: 0 | 1;
  nextAttemptAt: Date | null;
  lastError: string | null;
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string | null;
  providerMessageId: string | null;
  rejectedRecipients: RejectedRecipient[] | null;
  sentAt: Date | null;
  outcome: Exclude<AttemptOutcome, 'started'>;
  durationMs: number;
  /** Addresses the server said do not exist: they go on the suppression list. */
  bounced: string[];
  /** Null when nobody in this process listens for the event: then there is nothing to record or emit. */
  eventName: string | null;
  /** The event; it is recorded as its JSON, which is what a first emission and a redelivery both emit. */
  eventPayload: object;
}

export interface SettleResult {
  /** Rows whose lock token still matched, with the event recorded for each (if any): both are committed. */
  applied: Map<string, StoredEvent | null>;
}

export interface StoredEvent {
  id: string;
  name: string;
  payload: Record<string, unknown>;
}

export type Row = Record<string, any>;

export const toDate = (value: unknown): Date => (value instanceof Date ? value : new Date(String(value)));
export const toDateOrNull = (value: unknown): Date | null =>
  value === null || value === undefined ? null : toDate(value);

const INSERT_COLUMNS =
  'id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane, next_attempt_at, expires_at';
const INSERT_CONFLICT = 'on conflict (idempotency_key) where idempotency_key is not null do nothing';
const INSERT_RETURNING = 'returning id, idempotency_key, message_id, status, content_hash, lane';

/**
 * PostgreSQL's jsonb refuses \u0000, which a server reply or an error message may carry: drop it. The replacer that
 * does so is slow, so it runs only when the plain JSON shows the escape (or a backslash followed by "u0000").
 */
function jsonWithoutNul(value: unknown): string {
  const json = JSON.stringify(value);
  if (!json.includes('\\u0000')) return json;
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'string' ? item.replaceAll('\0', '') : item));
}

/** Runs a statement with bound parameters in the EntityManager's transaction, if it has one. */
async function query(em: EntityManager, sql: string, params: unknown[]): Promise<Row[]> {
  const result = await em.getKysely().executeQuery(CompiledQuery.raw(sql, params));
  return result.rows as Row[];
}

/**
 * Runs one of the dispatcher's statements as a named prepared statement on the pool (never inside a caller's
 * transaction): it is planned once per connection instead of at every claim and settle.
 */
async function prepared(em: EntityManager, name: string, sql: string, params: unknown[]): Promise<Row[]> {
  const pool = (await em.getConnection().getNativeClient());
  const result = await pool.query({ name, text: sql, values: params });
  return result.rows as Row[];
}

@Injectable()
export class OutboxRepository {
  /**
   * Inserts rows in one statement, skipping those whose idempotency key is taken. With `notify` the statement also
   * notifies each lane's dispatchers, which PostgreSQL delivers when the surrounding transaction commits.
   */
  async insert(em: EntityManager, rows: NewOutboxRow[], notify: boolean): Promise<InsertedRow[]> {
    const inserted =
      rows.length === 1 ? await this.insertOne(em, rows[0], notify) : await this.insertMany(em, rows, notify);
    return inserted.map((row) => this.mapInserted(row, true));
  }

  // A single row goes as plain parameters: cheaper for the server than unpacking a JSON array.
  private insertOne(em: EntityManager, row: NewOutboxRow, notify: boolean): Promise<Row[]> {
    return query(
      em,
      `insert into mail_outbox (${INSERT_COLUMNS})
       values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10)
       ${INSERT_CONFLICT} ${INSERT_RETURNING}${notify ? `, pg_notify('${WAKE_UP_CHANNEL}', lane)` : ''}`,
      [
        row.id,
        row.idempotencyKey,
        row.contentHash,
        row.messageId,
        JSON.stringify(row.payload),
        row.metadata === null ? null : JSON.stringify(row.metadata),
        row.maxAttempts,
        row.lane,
        row.notBefore,
        row.expiresAt,
      ],
    );
  }

  private insertMany(em: EntityManager, rows: NewOutboxRow[], notify: boolean): Promise<Row[]> {
    const input = rows.map((row) => ({
      id: row.id,
      idempotency_key: row.idempotencyKey,
      content_hash: row.contentHash,
      message_id: row.messageId,
      payload: row.payload,
      metadata: row.metadata,
      max_attempts: row.maxAttempts,
      lane: row.lane,
      next_attempt_at: row.notBefore?.toISOString() ?? null,
      expires_at: row.expiresAt?.toISOString() ?? null,
    }));
    const insert = `insert into mail_outbox (${INSERT_COLUMNS})
         select id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane,
                coalesce(next_attempt_at, now()), expires_at
         from jsonb_to_recordset($1::jsonb) as input(
           id uuid, idempotency_key text, content_hash text, message_id text, payload jsonb, metadata jsonb,
           max_attempts int, lane text, next_attempt_at timestamptz, expires_at timestamptz)
         ${INSERT_CONFLICT} ${INSERT_RETURNING}`;
    return query(
      em,
      notify
        ? `with inserted as (${insert}),
           notified as (select pg_notify('${WAKE_UP_CHANNEL}', lane) from (select distinct lane from inserted) lanes)
           select *, (select count(*) from notified) as lanes_notified from inserted`
        : insert,
      [JSON.stringify(input)],
    );
  }

  async findByIdempotencyKeys(em: EntityManager, idempotencyKeys: string[]): Promise<InsertedRow[]> {
    if (idempotencyKeys.length === 0) return [];
    const rows = await query(
      em,
      `select id, idempotency_key, message_id, status, content_hash from mail_outbox where idempotency_key = any($1::text[])`,
      [idempotencyKeys],
    );
    return rows.map((row) => this.mapInserted(row, false));
  }

  private mapInserted(row: Row, created: boolean): InsertedRow {
    return {
      id: row.id,
      idempotencyKey: row.idempotency_key,
      messageId: row.message_id,
      status: row.status,
      contentHash: row.content_hash,
      created,
    };
  }

  /**
   * Cancels a pending row at once; a row being sent gets a cancel request, honoured when its attempt settles.
   * Returns the row's status afterwards, or null when there is no such row.
   */
  async cancel(em: EntityManager, id: string): Promise<OutboxStatus | null> {
    const [changed] = await query(
      em,
      `update mail_outbox
       set status = case when status = 'pending' then 'cancelled' else status end,
           cancel_requested_at = case when status = 'sending' then now() else cancel_requested_at end,
           updated_at = now()
       where id = $1 and status in ('pending', 'sending')
       returning status`,
      [id],
    );
    if (changed) return changed.status;
    // A statement of its own: one that waited for a concurrent settle must see what that settle committed.
    const [current] = await query(em, `select status from mail_outbox where id = $1`, [id]);
    return current ? current.status : null;
  }

  /**
   * Claims up to `limit` due rows of a lane in one statement: pending rows whose time has come and `sending` rows
   * whose lease ran out (their worker died). Each claimed row gets the new lock token, a lease, and, when it is to
   * be sent, one more attempt and an attempt record that exists before the SMTP conversation starts. The attempt a
   * dead worker left open is marked `unknown`: the server may or may not have taken that message.
   *
   * The claim commits without waiting for its WAL flush (about half a millisecond here), which every send would
   * otherwise wait for. Only a crash of PostgreSQL itself can lose such a commit, and then the row is pending again
   * and is sent again: what a durable claim leads to as well, since its worker's settle is lost in that crash and
   * the lease runs out. The settle's commit does wait, and its flush covers the claim's commit written before it.
   */
  async claim(
    em: EntityManager,
    lane: string,
    limit: number,
    leaseMs: number,
    maxAgeMs: number,
    workerId: string,
    lockToken: string,
  ): Promise<ClaimedRow[]> {
    const rows = await prepared(
      em,
      'reliable_mail_claim',
      `with no_flush_wait as materialized (
         select set_config('synchronous_commit', 'off', true)
       ), expired as (
         select id from mail_outbox
         where status = 'sending' and lane = $1 and locked_until <= now()
         order by locked_until limit $2 for update skip locked
       ), pending as (
         select id from mail_outbox
         where status = 'pending' and lane = $1 and next_attempt_at <= now()
         order by next_attempt_at limit $2 for update skip locked
       ), due as (
         select id from (select id from expired union all select id from pending) candidates limit $2
       ), abandoned as (
         update mail_outbox_attempt set outcome = 'unknown', finished_at = now()
         where outbox_id in (select id from expired) and outbox_id in (select id from due) and outcome = 'started'
       ), claimed as (
         update mail_outbox o
         set status = 'sending', lock_token = $3, locked_by = $4, locked_until = now() + $5::float8 * interval '1 millisecond',
             attempts = o.attempts + 1, updated_at = now()
         from due where o.id = due.id
         returning o.id, o.message_id, o.idempotency_key, o.payload, o.metadata, o.attempts, o.max_attempts,
                   coalesce(o.requeued_at, o.created_at) as age_from, o.lane, o.expires_at, o.cancel_requested_at
       ), screened as (
         select claimed.*, suppressed.addresses as suppressed,
                case when claimed.cancel_requested_at is not null then 'cancelled'
                     when claimed.expires_at <= now() then 'expired'
                     -- A reclaimed row past its limits is closed here: its worker died without a settle to decide.
                     when claimed.id in (select id from expired)
                          and (claimed.attempts > claimed.max_attempts
                               or claimed.age_from <= now() - $6::float8 * interval '1 millisecond') then 'dead'
                     when jsonb_array_length(suppressed.addresses) = recipients.total then 'suppressed'
                end as skip_reason
         from claimed
         cross join lateral (
           select count(distinct lower(r->>'address')) as total, array_agg(distinct lower(r->>'address')) as addresses
           from jsonb_array_elements((claimed.payload->'to') || (claimed.payload->'cc') || (claimed.payload->'bcc')) r
         ) recipients
         -- Looked up by primary key from the recipient list: a join on the expanded array would let the planner
         -- read the whole suppression list for every claimed row.
         cross join lateral (
           select coalesce(jsonb_agg(s.address), '[]'::jsonb) as addresses
           from mail_suppression s where s.address = any(recipients.addresses)
         ) suppressed
       ), attempts as (
         insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token)
         select gen_random_uuid(), id, attempts, $4, $3 from screened where skip_reason is null
         returning id, outbox_id
       )
       select screened.*, attempts.id as attempt_id
       from screened left join attempts on attempts.outbox_id = screened.id cross join no_flush_wait`,
      [lane, limit, lockToken, workerId, leaseMs, maxAgeMs],
    );
    return rows.map((row) => ({
      id: row.id,
      messageId: row.message_id,
      idempotencyKey: row.idempotency_key,
      payload: row.payload,
      metadata: row.metadata,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      ageFrom: toDate(row.age_from),
      lane: row.lane,
      expiresAt: toDateOrNull(row.expires_at),
      lockToken,
      attemptId: row.attempt_id ?? null,
      skipReason: row.skip_reason ?? null,
      suppressed: row.suppressed,
    }));
  }

  /**
   * Applies settlements in one statement. A row changes only while it is still `sending` under the settling
   * worker's lock token, so a worker whose lease ran out cannot overwrite what another worker did; its attempt
   * record is completed either way, as it tells what really happened on the wire.
   *
   * Both tables are reached through their primary keys, given as arrays. The statement is planned once per
   * connection, often while the outbox is nearly empty; its plan must stay right when the table has grown. That is
   * also why the status is a parameter: with the literal 'sending' the planner may read the whole lease index
   * (whose predicate that is), and that index fills with the dead entries of every row sent since the last vacuum.
   */
  async settle(em: EntityManager, settlements: Settlement[], eventLeaseMs: number): Promise<SettleResult> {
    if (settlements.length === 0) {
      return { applied: new Map() };
    }
    const input = settlements.map((s) => ({
      id: s.id,
      lock_token: s.lockToken,
      attempt_id: s.attemptId,
      status: s.status,
      refund: s.refundAttempt,
      next_attempt_at: s.nextAttemptAt?.toISOString() ?? null,
      last_error: s.lastError,
      reply_code: s.replyCode,
      enhanced_status: s.enhancedStatus,
      reply: s.reply,
      provider_message_id: s.providerMessageId,
      rejected: s.rejectedRecipients,
      sent_at: s.sentAt?.toISOString() ?? null,
      outcome: s.outcome,
      duration_ms: s.durationMs,
      bounced: s.bounced,
      event_name: s.eventName,
      // Serialised only when the event is to be recorded: most settles have no listener for theirs.
      event_payload: s.eventName === null ? null : s.eventPayload,
    }));
    const rows = await prepared(
      em,
      'reliable_mail_settle',
      `with input as (
         select * from jsonb_to_recordset($1::jsonb) as x(
           id uuid, lock_token uuid, attempt_id uuid, status text, refund int, next_attempt_at timestamptz,
           last_error text, reply_code int, enhanced_status text, reply text, provider_message_id text,
           rejected jsonb, sent_at timestamptz, outcome text, duration_ms int, bounced jsonb, event_name text,
           event_payload jsonb)
       ), settled as (
         update mail_outbox o
         set status = case when i.status = 'pending' and o.cancel_requested_at is not null then 'cancelled' else i.status end,
             attempts = o.attempts - i.refund,
             next_attempt_at = coalesce(i.next_attempt_at, o.next_attempt_at),
             locked_until = null, lock_token = null, locked_by = null,
             last_error = i.last_error,
             last_reply_code = i.reply_code,
             last_enhanced_status = i.enhanced_status,
             provider_reply = case when i.status = 'sent' then i.reply else o.provider_reply end,
             provider_message_id = coalesce(i.provider_message_id, o.provider_message_id),
             rejected_recipients = coalesce(i.rejected, o.rejected_recipients),
             sent_at = coalesce(i.sent_at, o.sent_at),
             updated_at = now()
         from input i
         where o.id = any($3::uuid[]) and o.id = i.id and o.lock_token = i.lock_token and o.status = $5
         returning o.id, o.status
       ), attempts as (
         update mail_outbox_attempt a
         set finished_at = now(), outcome = i.outcome, reply_code = i.reply_code,
             enhanced_status = i.enhanced_status, reply = i.reply, duration_ms = i.duration_ms
         from input i where a.id = any($4::uuid[]) and a.id = i.attempt_id
       ), suppressed as (
         insert into mail_suppression (address, reason, source, outbox_id)
         select distinct on (address.value) address.value, i.reply, 'bounce', i.id
         from input i join settled on settled.id = i.id cross join lateral jsonb_array_elements_text(i.bounced) address
         on conflict (address) do nothing
       ), events as (
         insert into mail_outbox_event (outbox_id, name, payload, locked_until)
         select i.id, i.event_name,
                case when settled.status = i.status then i.event_payload
                     else i.event_payload || jsonb_build_object('status', settled.status, 'nextAttemptAt', null) end,
                now() + $2::float8 * interval '1 millisecond'
         from input i join settled on settled.id = i.id
         where i.event_name is not null
         returning id, outbox_id, name, payload
       )
       select settled.id, events.id as event_id, events.name, events.payload
       from settled left join events on events.outbox_id = settled.id`,
      [
        jsonWithoutNul(input),
        eventLeaseMs,
        settlements.map((s) => s.id),
        settlements.flatMap((s) => (s.attemptId ? [s.attemptId] : [])),
        'sending',
      ],
    );
    return {
      applied: new Map(
        rows.map((row) => [
          row.id as string,
          row.event_id === null ? null : { id: String(row.event_id), name: row.name, payload: row.payload },
        ]),
      ),
    };
  }

  /**
   * Gives claimed rows back untouched (shutdown before their send started): the claim's attempt is taken back and
   * its attempt record deleted, so the row is as if it had never been claimed.
   */
  async release(em: EntityManager, rows: Array<Pick<ClaimedRow, 'id' | 'lockToken' | 'attemptId'>>): Promise<void> {
    await query(
      em,
      `with released as (
         update mail_outbox o
         set status = 'pending', attempts = o.attempts - 1, locked_until = null, lock_token = null, locked_by = null,
             updated_at = now()
         from unnest($1::uuid[], $2::uuid[]) as r(id, lock_token)
         where o.id = r.id and o.lock_token = r.lock_token and o.status = 'sending'
         returning o.id
       )
       delete from mail_outbox_attempt a using released where a.outbox_id = released.id and a.id = any($3::uuid[])`,
      [
        rows.map((row) => row.id),
        rows.map((row) => row.lockToken),
        rows.flatMap((row) => (row.attemptId ? [row.attemptId] : [])),
      ],
    );
  }

  /**
   * Takes events of the given names whose emitter did not confirm them in time (it crashed, or a listener threw).
   */
  async claimUnconfirmedEvents(
    em: EntityManager,
    names: string[],
    limit: number,
    leaseMs: number,
  ): Promise<StoredEvent[]> {
    const rows = await prepared(
      em,
      'reliable_mail_claim_events',
      `update mail_outbox_event e set locked_until = now() + $1::float8 * interval '1 millisecond'
       where e.id in (
         select id from mail_outbox_event where locked_until <= now() and name = any($3::text[])
         order by id limit $2 for update skip locked
       )
       returning e.id, e.name, e.payload`,
      [leaseMs, limit, names],
    );
    return rows.map((row) => ({ id: String(row.id), name: row.name, payload: row.payload }));
  }

  async deleteEvents(em: EntityManager, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await prepared(em, 'reliable_mail_confirm_events', `delete from mail_outbox_event where id = any($1::bigint[])`, [
      ids,
    ]);
  }
}
