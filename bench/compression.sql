-- What compressing the outbox's payloads costs PostgreSQL as it writes them: 8 batches of 500 mails of ~2 KB of
-- prose each, inserted through jsonb_to_recordset as enqueueMany does, into a table with pglz (the default) and then
-- with lz4 (schema version 7). Temporary tables only; needs PostgreSQL 14 or later built with lz4.
--   psql "$BENCH_PG_URL" -f bench/compression.sql
-- Each insert's time is printed (\timing: pglz's 8, then lz4's 8, then the query that made them), then the average
-- stored payload size per method.
\set ON_ERROR_STOP on
create temp table batch as
  select jsonb_agg(jsonb_build_object(
           'message_id', '<' || gen_random_uuid() || '@bench.example.com>',
           'payload', jsonb_build_object('to', 'ann@example.com', 'subject', 'Bench', 'text',
             (select string_agg((array['order', 'invoice', 'shipment', 'account', 'password', 'reset', 'confirm',
                                       'welcome', 'receipt', 'payment', 'delivery', 'tracking', 'update', 'renewal',
                                       'reminder', 'security', 'alert', 'login', 'device', 'address', 'change',
                                       'profile', 'verify', 'summary', 'weekly', 'report', 'export', 'ready',
                                       'download', 'thanks'])[1 + floor(random() * 30)::int]
                                || case when random() < 0.09 then E'.\n' else ' ' end, '')
              from generate_series(1, 250 + i % 7) g)))) as mails
  from generate_series(1, 500) i;
create temp table outbox_pglz (id uuid primary key, message_id text not null unique, payload jsonb compression pglz);
create temp table outbox_lz4 (id uuid primary key, message_id text not null unique, payload jsonb compression lz4);
\timing on
-- Each statement \gexec runs is timed: 8 batches into the pglz table, then 8 into the lz4 one.
select format('insert into outbox_%s select gen_random_uuid(), message_id || %s, payload
               from batch, jsonb_to_recordset(mails) as x(message_id text, payload jsonb)', method, run)
from unnest(array['pglz', 'lz4']) as method, generate_series(1, 8) as run
order by method = 'lz4', run
\gexec
\timing off
select 'pglz' as method, avg(pg_column_size(payload))::int as stored_bytes from outbox_pglz
union all
select 'lz4', avg(pg_column_size(payload))::int from outbox_lz4;
