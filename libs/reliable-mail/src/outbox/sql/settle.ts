import type { Settlement, StoredEvent } from '../queue.types.js';
import { storableDateOrNull, storableIdentifier, storableJson } from '../../database/storable.js';
import { type QueryBound, type SqlClient, Statement } from '../../database/sql-client.js';
import { relayCopies } from '../../relay/sql/relay-copies.js';

/**
 * Applies settlements in one statement, several rows at a time. A settlement applies only within the lease it was
 * claimed under: while its row is still `sending` under the settling worker's lock token and the lease has not ended
 * when the statement starts. A statement that reaches the server late (a silent connection may deliver it minutes
 * later, long after its worker gave up) changes nothing, neither the row nor the attempt record: once the lease
 * ended, the row may have been claimed again, its attempt marked `unknown` by that claim and sent again on that
 * ground, and a late write must not record that attempt `sent` as though the second copy had been sent knowingly.
 * What the stale worker saw is in its log. One batch may hold a stale and a current settlement of the same row:
 * only the one whose token won records its event and bounces.
 *
 * Both tables are reached through their primary keys, given as arrays ($3, $4) beside the JSON that repeats them,
 * within the days the rows are kept in ($6 to $7: see `dayRange`).
 * The statement is planned once per connection, often while the outbox is nearly empty; its plan must stay right
 * when the table has grown. A generic plan made on an empty attempts table seq-scanned it at every settle, and
 * PostgreSQL's CPU grew from 22% to 62% over one drain. That is also why the status is a parameter ($5): with the
 * literal 'sending' the planner may read the whole lease index (whose predicate that is), and that index fills
 * with the dead entries of every row sent since the last vacuum.
 *
 * An event is numbered once (`recorded`, materialised: nextval is volatile) and kept for the app's listeners when
 * something listens for it, and for each relay destination registered for its name (see 0014-event-relay.ts).
 */
export const SETTLE = new Statement((t) => ({
  name: 'reliable_mail_settle',
  text: `with input as (
    select * from jsonb_to_recordset($1::jsonb) as x(
      id uuid, lock_token uuid, attempt_id uuid, status text, refund int, next_attempt_at timestamptz,
      last_error text, reply_code int, enhanced_status text, reply text, provider_message_id text,
      provider_message_ids text[], provider_request_id text, provider_accepted_at timestamptz, deduplicated_by_key boolean, accepted jsonb, rejected jsonb, attempt_recipients jsonb, sent_at timestamptz, outcome text, duration_ms int,
      transport text, bounced jsonb, event_name text, event_for_listeners boolean, event_payload jsonb)
  ), settled as (
    update ${t.outbox} o
    set status = case when i.status = 'pending' and o.cancel_requested_at is not null then 'cancelled' else i.status end,
        attempts = o.attempts - i.refund,
        next_attempt_at = coalesce(i.next_attempt_at, o.next_attempt_at),
        locked_until = null, lock_token = null, locked_by = null,
        last_error = i.last_error,
        last_reply_code = i.reply_code,
        last_enhanced_status = i.enhanced_status,
        provider_reply = case when i.status = 'sent' then i.reply else o.provider_reply end,
        provider_message_id = coalesce(i.provider_message_id, o.provider_message_id),
        provider_message_ids = case when i.provider_message_ids is null then o.provider_message_ids
                                    else array(select distinct unnest(o.provider_message_ids || i.provider_message_ids)) end,
        provider_request_id = coalesce(i.provider_request_id, o.provider_request_id),
        provider_accepted_at = coalesce(i.provider_accepted_at, o.provider_accepted_at),
        accepted_recipients = coalesce(i.accepted, o.accepted_recipients),
        rejected_recipients = coalesce(i.rejected, o.rejected_recipients),
        sent_at = coalesce(i.sent_at, o.sent_at),
        updated_at = now()
    from input i
    where o.id = any($3::uuid[]) and o.partition_day between $6::date and $7::date
      and o.id = i.id and o.lock_token = i.lock_token and o.status = $5 and o.locked_until > now()
    returning o.id, o.status, i.lock_token
  ), attempts as (
    update ${t.attempt} a
    set finished_at = now(), outcome = i.outcome, reply_code = i.reply_code,
        enhanced_status = i.enhanced_status, reply = i.reply, duration_ms = i.duration_ms,
        recipients = i.attempt_recipients, provider_message_id = i.provider_message_id,
        provider_request_id = i.provider_request_id, provider_accepted_at = i.provider_accepted_at,
        deduplicated_by_key = i.deduplicated_by_key, transport = i.transport
    from input i join settled on settled.id = i.id and settled.lock_token = i.lock_token
    where a.id = any($4::uuid[]) and a.partition_day between $6::date and $7::date and a.id = i.attempt_id
  ), suppressed as (
    insert into ${t.suppression} (address, reason, source, outbox_id)
    select distinct on (bounce.address) bounce.address, coalesce(bounce.reply, 'hard bounce'), 'bounce', i.id
    from input i join settled on settled.id = i.id and settled.lock_token = i.lock_token
    cross join lateral jsonb_to_recordset(i.bounced) as bounce(address text, reply text)
    on conflict (address) do nothing
  ), recorded as (
    select nextval('${t.eventIdSequence}') as id, i.id as outbox_id, i.event_name as name, i.event_for_listeners,
           case when settled.status = i.status then i.event_payload
                else i.event_payload || jsonb_build_object('status', settled.status, 'cause', 'cancelled',
                                                          'nextAttemptAt', null, 'deferred', '[]'::jsonb) end as payload
    from input i join settled on settled.id = i.id and settled.lock_token = i.lock_token
    where i.event_name is not null
  ), events as (
    insert into ${t.event} (id, outbox_id, name, payload, locked_until)
    select id, outbox_id, name, payload, now() + $2::float8 * interval '1 millisecond'
    from recorded where event_for_listeners
    returning id, outbox_id, name, payload
  ), relayed as (
    ${relayCopies(t, 'recorded')}
  )
  select settled.id, settled.lock_token, events.id as event_id, events.name, events.payload
  from settled left join events on events.outbox_id = settled.id`,
}));

/**
 * A settlement as the statement takes it, its JSON written once, before it joins a batch: what JSON cannot write (a
 * BigInt, a cycle, a toJSON that throws) then fails this settlement alone, where it failed its whole batch.
 */
export interface SettleInput {
  settlement: Settlement;
  json: string;
}

/**
 * Throws when a value of the settlement cannot be written as JSON. Its event (when `eventName` is set) is kept for
 * the app's listeners when `forListeners`, and for the relay destinations registered for its name either way.
 */
export function settleInputOf(settlement: Settlement, forListeners = true): SettleInput {
  return { settlement, json: storableJson(settleInput(settlement, forListeners)) };
}

/** The settle's parameters in statement order. */
export function settleValues(inputs: readonly SettleInput[], eventLeaseMs: number): unknown[] {
  return [
    `[${inputs.map(({ json }) => json).join(',')}]`,
    eventLeaseMs,
    inputs.map(({ settlement }) => settlement.id),
    inputs.flatMap(({ settlement }) => (settlement.attemptId ? [settlement.attemptId] : [])),
    'sending',
    ...dayRange(inputs),
  ];
}

/**
 * The first and last day of the rows' (YYYY-MM-DD strings compare as dates). A range, not an array: a partitioned
 * outbox prunes its partitions to the range when the statement starts, a generic plan's parameters included, where
 * `= any(array)` of days is pruned by no PostgreSQL release (a settle of 64 over 30 days read each day's index).
 */
function dayRange(inputs: readonly SettleInput[]): [string, string] {
  let first = inputs[0].settlement.partitionDay;
  let last = first;
  for (const { settlement } of inputs) {
    if (settlement.partitionDay < first) first = settlement.partitionDay;
    if (settlement.partitionDay > last) last = settlement.partitionDay;
  }
  return [first, last];
}

/** The provider's ids of the requests that took the message in this attempt; null when none says (SMTP). */
function requestMessageIds(s: Settlement): string[] | null {
  const ids = new Set<string>();
  for (const recipient of s.attemptRecipients ?? []) {
    const id = recipient.status === 'accepted' ? storableIdentifier(recipient.providerMessageId) : null;
    if (id) ids.add(id);
  }
  return ids.size > 0 ? [...ids] : null;
}

function settleInput(s: Settlement, forListeners: boolean) {
  return {
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
    // Ids are looked up through indexes, which a peer's absurdly long one would fail: such an id is none.
    provider_message_id: storableIdentifier(s.providerMessageId),
    provider_message_ids: requestMessageIds(s),
    provider_request_id: storableIdentifier(s.providerRequestId),
    provider_accepted_at: storableDateOrNull(s.providerAcceptedAt)?.toISOString() ?? null,
    deduplicated_by_key: s.deduplicatedByKey,
    accepted: s.acceptedRecipients,
    rejected: s.rejectedRecipients,
    attempt_recipients: s.attemptRecipients,
    sent_at: s.sentAt?.toISOString() ?? null,
    outcome: s.outcome,
    duration_ms: s.durationMs,
    transport: s.transport,
    bounced: s.bounced,
    event_name: s.eventName,
    event_for_listeners: forListeners,
    // Serialised only when the event is to be recorded: most settles have no listener for theirs.
    event_payload: s.eventName === null ? null : s.eventPayload,
  };
}

interface SettledRecord {
  id: string;
  lock_token: string;
  event_id: string | null;
  name: string | null;
  payload: Record<string, unknown> | null;
}

/**
 * The settlements whose lock token still matched (keyed by `settlementKey`), with the event recorded for each (if
 * any): both are committed.
 */
export type AppliedSettlements = Map<string, StoredEvent | null>;

/** One settlement of one claim: a row id alone is not enough, since a stale claim's settlement may share a batch. */
export const settlementKey = (settlement: Pick<Settlement, 'id' | 'lockToken'>): string =>
  `${settlement.id}/${settlement.lockToken}`;

export async function settleRows(
  db: SqlClient,
  inputs: readonly SettleInput[],
  eventLeaseMs: number,
  bound?: QueryBound,
): Promise<AppliedSettlements> {
  if (inputs.length === 0) return new Map();
  const rows = await db.query<SettledRecord>(SETTLE, settleValues(inputs, eventLeaseMs), bound);
  return new Map(
    rows.map((row) => [
      settlementKey({ id: row.id, lockToken: row.lock_token }),
      row.event_id === null ? null : { id: String(row.event_id), name: row.name!, payload: row.payload! },
    ]),
  );
}
