import { storableJson } from '../../database/storable.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import { relayCopies } from '../../relay/sql/relay-copies.js';
import { PARTITION_DAY_DEFAULT } from '../../schema/versions/0013-partition-days.js';
import type { StoredEvent } from '../../outbox/queue.types.js';
import type { BounceType, FeedbackKind } from '../../outbox/feedback.types.js';
import type { StoredTraceContext } from '../../shared/trace-context.js';

/** One recipient's feedback as the statement takes it. */
export interface FeedbackInput {
  id: string;
  source: string;
  recipient: string;
  kind: FeedbackKind;
  bounce_type: BounceType | null;
  provider_event_id: string;
  provider_message_id: string | null;
  /** The row the report names by its Message-ID (then `message_id` must match) or by its VERP address. */
  row_id: string | null;
  message_id: string | null;
  status: string | null;
  diagnostic: string | null;
  reported_at: string;
  payload: Record<string, unknown>;
  /** The suppression list's reason, when the feedback asks for the recipient to be suppressed. */
  suppression_reason: string | null;
  /**
   * Whether the report proves it speaks for this recipient (a verified webhook, a DSN through the recipient's own
   * VERP address); an unauthenticated one has no `suppression_reason`. Reported in the bounce or complaint event.
   */
  authenticated: boolean;
  /** The event the report records, or null when neither a listener nor a relay destination takes it. */
  event_name: string | null;
  /** Whether the event is kept for the app's listeners too, not only for the relay destinations registered for it. */
  event_for_listeners: boolean;
  event_payload: Record<string, unknown> | null;
}

/**
 * Stores feedback, links it to its row, suppresses and records events, in one statement: so a webhook is answered
 * only after all of it committed, and a repeat (a provider delivers at least once) changes nothing. A row is found
 * by the id the report names (its VERP address, or its Message-ID, which is `<id@domain>`), else by the provider's
 * message id: the row's, or that of any request the mail went in. Feedback for no known row is stored unlinked and
 * records no event. The suppression list takes the hard bounces and complaints that come with a reason (those of
 * authenticated reports) with the source the list knows them by, keeping an operator's entry. Each stored report
 * comes back with its row's trace context, for the report's span.
 */
export const RECORD_FEEDBACK = new Statement((t) => ({
  name: 'reliable_mail_record_feedback',
  text: `with input as (
    select * from jsonb_to_recordset($1::jsonb) as x(
      id uuid, source text, recipient text, kind text, bounce_type text, provider_event_id text,
      provider_message_id text, row_id uuid, message_id text, status text, diagnostic text, reported_at timestamptz,
      payload jsonb, suppression_reason text, authenticated boolean, event_name text, event_for_listeners boolean,
      event_payload jsonb)
  ), linked as (
    select i.*, o.id as outbox_id, o.message_id as row_message_id, o.idempotency_key, o.metadata, o.traceparent,
           o.tracestate, o.partition_day, i.suppression_reason is not null as suppresses
    from input i left join lateral (
      (select r.id, r.message_id, r.idempotency_key, r.metadata, r.traceparent, r.tracestate, r.partition_day
       from ${t.outbox} r
       where r.id = i.row_id and (i.message_id is null or r.message_id = i.message_id))
      union all
      (select r.id, r.message_id, r.idempotency_key, r.metadata, r.traceparent, r.tracestate, r.partition_day
       from ${t.outbox} r
       where r.provider_message_id = i.provider_message_id)
      union all
      (select r.id, r.message_id, r.idempotency_key, r.metadata, r.traceparent, r.tracestate, r.partition_day
       from ${t.outbox} r
       where r.provider_message_ids @> array[i.provider_message_id])
      limit 1
    ) o on true
  ), locked as (
    -- The rows found, locked (FOR KEY SHARE, the lock the plain layout's foreign key takes anyway) before the
    -- feedback is stored in their day: retention, moving a row forward, skips a row another session holds, so the day
    -- read is still the row's at the commit, and the feedback is not left in an old day to be dropped. A move under
    -- way or committed since the statement began makes this lock fail (40001): the provider sends the report again.
    select r.id from ${t.outbox} r where r.id = any(array(select outbox_id from linked)) for key share
  ), stored as (
    -- In its row's partition_day (a partitioned outbox drops a row's feedback with it), else in today's. ON CONFLICT
    -- names no index: the repeat's unique index is (source, provider_event_id, recipient) in the plain layout and
    -- has the day too in the partitioned one, where a repeat finds the same row, so the same day, unless retention
    -- has moved the row forward since: then it is stored a second time, in the row's new day (it suppresses nothing
    -- more, and records its event again).
    insert into ${t.feedback} (id, outbox_id, source, recipient, kind, bounce_type, provider_event_id,
                                      provider_message_id, status, diagnostic, reported_at, payload, partition_day)
    select l.id, l.outbox_id, l.source, l.recipient, l.kind, l.bounce_type, l.provider_event_id,
           l.provider_message_id, l.status, l.diagnostic, l.reported_at, l.payload,
           coalesce(l.partition_day, ${PARTITION_DAY_DEFAULT})
    from linked l left join locked k on k.id = l.outbox_id
    on conflict do nothing
    returning id
  ), kept as (
    -- The reports this statement stored: a provider's repeat of one stores, suppresses and records nothing.
    select l.* from linked l join stored s on s.id = l.id
  ), suppressed as (
    insert into ${t.suppression} (address, reason, source, outbox_id)
    select distinct on (l.recipient) l.recipient, l.suppression_reason,
           case when l.kind = 'complained' then 'complaint' else 'bounce' end, l.outbox_id
    from kept l
    where l.suppresses
    on conflict (address) do nothing
  ), recorded as (
    -- Numbered once (nextval is volatile: materialised), for the listeners and each relay destination alike.
    select nextval('${t.eventIdSequence}') as id, l.outbox_id, l.event_name as name, l.event_for_listeners,
           l.event_payload || jsonb_build_object('id', l.outbox_id, 'messageId', l.row_message_id,
                                                 'idempotencyKey', l.idempotency_key, 'metadata', l.metadata)
             || case when l.kind in ('bounced', 'complained')
                     then jsonb_build_object('suppressed', l.suppresses, 'authenticated', l.authenticated)
                     else '{}'::jsonb end as payload
    from kept l
    where l.outbox_id is not null and l.event_name is not null
  ), events as (
    insert into ${t.event} (id, outbox_id, name, payload, locked_until)
    select id, outbox_id, name, payload, now() + $2::float8 * interval '1 millisecond'
    from recorded where event_for_listeners
    returning id, name, payload
  ), relayed as (
    ${relayCopies(t, 'recorded')}
  )
  select l.id, l.kind, l.bounce_type, l.outbox_id, l.traceparent, l.tracestate, null::bigint as event_id,
         null::text as name, null::jsonb as payload
  from kept l
  union all
  select null, null, null, null, null, null, id, name, payload from events`,
}));

interface RecordedRow {
  id: string | null;
  kind: FeedbackKind | null;
  bounce_type: BounceType | null;
  outbox_id: string | null;
  traceparent: string | null;
  tracestate: string | null;
  event_id: string | null;
  name: string | null;
  payload: Record<string, unknown> | null;
}

/** A feedback row the statement wrote, and the row it is linked to, if any, with that row's trace context. */
export interface StoredFeedback extends StoredTraceContext {
  id: string;
  kind: FeedbackKind;
  bounceType: BounceType | null;
  outboxId: string | null;
}

export interface RecordedFeedback {
  /** The feedback rows this statement wrote (a repeat of an earlier report writes none). */
  stored: StoredFeedback[];
  /** The events recorded with them: committed, to be published. */
  events: StoredEvent[];
}

export async function recordFeedback(
  db: SqlClient,
  inputs: FeedbackInput[],
  eventLeaseMs: number,
): Promise<RecordedFeedback> {
  const rows = await db.query<RecordedRow>(RECORD_FEEDBACK, [storableJson(inputs), eventLeaseMs]);
  const recorded: RecordedFeedback = { stored: [], events: [] };
  for (const row of rows) {
    if (row.event_id !== null)
      recorded.events.push({ id: String(row.event_id), name: row.name!, payload: row.payload! });
    else
      recorded.stored.push({
        id: row.id!,
        kind: row.kind!,
        bounceType: row.bounce_type,
        outboxId: row.outbox_id,
        traceparent: row.traceparent,
        tracestate: row.tracestate,
      });
  }
  return recorded;
}
