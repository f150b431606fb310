import type { MailPayload, RejectedRecipient } from '../mail.types.js';
import type { ClaimedRow } from '../queue.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate, toDateOrNull } from './timestamps.js';

export interface ClaimRequest {
  lane: string;
  limit: number;
  /** The token every row of this claim is locked with; its settle must present it. */
  lockToken: string;
  workerId: string;
  leaseMs: number;
  /** `retry.maxAgeMs`: a row reclaimed after its worker died is closed as dead once it is older. */
  maxAgeMs: number;
  /**
   * The category of a lane marked `transactional: false` (`ResolvedLane.unsubscribe`): recipients unsubscribed from
   * it are suppressed for this lane's rows. Absent or null for a transactional lane, which unsubscribes never stop.
   */
  unsubscribeCategory?: string | null;
}

/**
 * A UUID version 7 (RFC 9562) for each attempt: the claim's time in ms in the first 48 bits, then the version bits,
 * over a random UUID. Time-ordered keys go to the right-hand leaf pages of the attempts' primary key, which stay in
 * the cache; random ones (gen_random_uuid) went each to a page of its own anywhere in it: once a month of attempts
 * outgrew the cache, a claim of 64 read 49-63 of them from disk (`npm run bench`, a million sent rows), a third of
 * its time. PostgreSQL 18's uuidv7() would do; 13 to 17 have none.
 */
const TIME_ORDERED_UUID = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    placing substring(int8send((extract(epoch from now()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1),
    'hex')::uuid`;

/**
 * Claims up to $2 due rows of lane $1 in one statement: pending rows whose time has come and `sending` rows whose
 * lease ran out (their worker died). Each claimed row gets the lock token $3, a lease of $5 ms, and, when it is to
 * be sent, one more attempt and an attempt record that exists before the SMTP conversation starts. The attempt a
 * dead worker left open is marked `unknown`: the server may or may not have taken that message. Its recipients on
 * the suppression list, and for a non-transactional lane those unsubscribed from its category $7, are suppressed.
 *
 * It reads only the partial indexes of due and leased rows: with 100,000 due rows a claim of 64 took 3–6 ms and
 * read ~1,400 buffers, the same with a million sent rows beside them (`npm run bench`).
 *
 * The claim's commit waits for its WAL flush like any other (about half a millisecond here, once per claimed
 * batch). A claim committed without it could vanish in a crash or failover of PostgreSQL while its send goes on:
 * the row would then be due again and sent a second time, with no record of the first attempt, where a durable
 * claim keeps the row `sending` and its worker's settle lands once the server is back. With synchronous
 * replication the flush also waits for the standby, so a promoted standby knows the claim too.
 */
export const CLAIM = new Statement((t) => ({
  name: 'reliable_mail_claim',
  text: `with expired as (
    select id from ${t.outbox}
    where status = 'sending' and lane = $1 and locked_until <= now()
    order by locked_until limit $2 for update skip locked
  ), pending as (
    select id from ${t.outbox}
    where status = 'pending' and lane = $1 and next_attempt_at <= now()
    order by next_attempt_at limit $2 for update skip locked
  ), due as (
    select id from (select id from expired union all select id from pending) candidates limit $2
  ), abandoned as (
    update ${t.attempt} set outcome = 'unknown', finished_at = now()
    where outbox_id = any(array(select id from expired)) and outbox_id in (select id from due) and outcome = 'started'
  ), claimed as (
    -- The rows by primary key array, an index condition whatever the plan was made on (see OutboxDatabase); a join
    -- with the CTE, planned while the outbox was empty, read the whole primary key once it had grown.
    update ${t.outbox} o
    set status = 'sending', lock_token = $3, locked_by = $4, locked_until = now() + $5::float8 * interval '1 millisecond',
        attempts = o.attempts + 1, updated_at = now()
    where o.id = any(array(select id from due))
    returning o.id, o.message_id, o.idempotency_key, o.payload, o.metadata, o.attempts, o.max_attempts,
              coalesce(o.requeued_at, o.created_at) as age_from, o.lane, o.expires_at, o.cancel_requested_at,
              o.accepted_recipients, o.rejected_recipients, o.attempts > 1 or o.requeued_at is not null as sent_before,
              o.traceparent, o.tracestate, o.partition_day
  ), screened as (
    select claimed.*, suppressed.addresses as suppressed, earlier.addresses as possibly_taken,
           earlier.transport as possibly_taken_through,
           case when claimed.cancel_requested_at is not null then 'cancelled'
                when claimed.expires_at <= now() then 'expired'
                -- A row past its limits is closed here: its worker died without a settle to decide. Past its
                -- attempts, whatever its status: a reclaimed row given back unsent (claimed ahead, or a claim whose
                -- answer was lost) is pending again with the dead worker's attempt counted. No other row is: a settle
                -- dead-letters a row at its last attempt, and a requeue counts from zero. Past its age only when
                -- reclaimed: a pending row is tried once more, and its settle decides.
                when claimed.attempts > claimed.max_attempts
                     or (claimed.id in (select id from expired)
                         and claimed.age_from <= now() - $6::float8 * interval '1 millisecond') then 'dead'
                when jsonb_array_length(suppressed.addresses) = recipients.total then 'suppressed'
           end as skip_reason
    from claimed
    cross join lateral (
      select count(distinct lower(r->>'address')) as total, array_agg(distinct lower(r->>'address')) as addresses
      from jsonb_array_elements((claimed.payload->'to') || (claimed.payload->'cc') || (claimed.payload->'bcc')) r
    ) recipients
    -- Looked up by primary key from the recipient list: a join on the expanded array would let the planner
    -- read the whole suppression list for every claimed row. The unsubscribes of the lane's category too, by
    -- (address, category); for a transactional lane (a null category) a one-time filter skips that scan.
    cross join lateral (
      select coalesce(jsonb_agg(listed.address), '[]'::jsonb) as addresses
      from (select s.address from ${t.suppression} s where s.address = any(recipients.addresses)
            union
            select u.address from ${t.unsubscribe} u
            where $7::text is not null and u.address = any(recipients.addresses) and u.category = $7::text) listed
    ) suppressed
    -- The recipients an earlier attempt may have reached: those it recorded as unknown, or every one when it recorded
    -- none (its worker died mid-send). A provider that deduplicates by key reads a refusal of the key as that attempt's
    -- (OutboundMessage.possiblyTakenBefore). Looked up only for a row sent before (a retry, a requeue), through the
    -- attempts' index by row: the one-time filter skips the scan for a first attempt, most of any claim.
    cross join lateral (
      select case when bool_or(jsonb_typeof(a.recipients) is distinct from 'array') then to_jsonb(recipients.addresses)
                  else coalesce(jsonb_agg(distinct lower(r->>'address'))
                                  filter (where r->>'status' = 'unknown' and r->>'address' is not null), '[]'::jsonb)
             end as addresses,
             -- The transport of the latest such attempt, in a lane of several: the retry goes through it alone.
             (array_agg(a.transport order by a.attempt desc) filter (where a.transport is not null))[1] as transport
      from ${t.attempt} a
      left join lateral jsonb_array_elements(
        case when jsonb_typeof(a.recipients) = 'array' then a.recipients else '[]'::jsonb end) r on true
      where claimed.sent_before and a.outbox_id = claimed.id and a.outcome in ('unknown', 'started')
    ) earlier
  ), attempts as (
    -- In its row's partition_day: a partitioned outbox keeps a row's attempts in the partitions of its day.
    insert into ${t.attempt} (id, outbox_id, attempt, worker_id, lock_token, partition_day)
    select ${TIME_ORDERED_UUID}, id, attempts, $4, $3, partition_day from screened where skip_reason is null
    returning id, outbox_id
  )
  select screened.*, to_char(screened.partition_day, 'YYYY-MM-DD') as day, attempts.id as attempt_id
  from screened left join attempts on attempts.outbox_id = screened.id`,
}));

/** The claim's parameters in statement order, for a caller that runs or EXPLAINs the statement itself. */
export function claimValues(request: ClaimRequest): unknown[] {
  return [
    request.lane,
    request.limit,
    request.lockToken,
    request.workerId,
    request.leaseMs,
    request.maxAgeMs,
    request.unsubscribeCategory ?? null,
  ];
}

interface ClaimedRecord {
  id: string;
  message_id: string;
  idempotency_key: string | null;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  attempts: number;
  max_attempts: number;
  age_from: Date | string;
  lane: string;
  expires_at: Date | string | null;
  attempt_id: string | null;
  skip_reason: ClaimedRow['skipReason'];
  suppressed: string[];
  possibly_taken: string[];
  possibly_taken_through: string | null;
  accepted_recipients: string[] | null;
  rejected_recipients: RejectedRecipient[] | null;
  traceparent: string | null;
  tracestate: string | null;
  /**
   * `partition_day` as YYYY-MM-DD, whatever the session's DateStyle: pg would make a date column a Date at local
   * midnight, and `::text` follows DateStyle (`03/12/2026` under SQL, DMY), which the settle's range compares as text.
   */
  day: string;
}

export async function claimRows(db: SqlClient, request: ClaimRequest): Promise<ClaimedRow[]> {
  const leaseEndsAt = performance.now() + request.leaseMs;
  const rows = await db.query<ClaimedRecord>(CLAIM, claimValues(request));
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
    lockToken: request.lockToken,
    partitionDay: row.day,
    attemptId: row.attempt_id ?? null,
    skipReason: row.skip_reason ?? null,
    suppressed: row.suppressed,
    possiblyTakenBefore: row.possibly_taken,
    possiblyTakenThrough: row.possibly_taken_through,
    acceptedRecipients: row.accepted_recipients ?? [],
    rejectedRecipients: row.rejected_recipients ?? [],
    traceparent: row.traceparent,
    tracestate: row.tracestate,
    leaseEndsAt,
  }));
}
