import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import type { Statement } from '../../libs/reliable-mail/src/database/sql-client.js';
import { CLAIM, claimValues } from '../../libs/reliable-mail/src/outbox/sql/claim.js';
import { MOVE_FORWARD } from '../../libs/reliable-mail/src/outbox/sql/move-forward.js';
import { SETTLE, settleInputOf, settleValues } from '../../libs/reliable-mail/src/outbox/sql/settle.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { addDays, keptRowsCheck } from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { sentSettlement, utcToday } from '../support/settlements.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { partitionedSince } from './partition-rows.js';

// The claim and the settle over 30 days' partitions, planned once on empty tables as reliable-mail's connections plan
// them (a generic plan, kept), then run on grown ones: the claim reads the due and lease partial indexes of every
// partition, merged in order (Merge Append), and the settle the (id, day) index of each partition in its rows' days;
// neither scans a partition whole. Prints what a claim of 64 and a settle of 64 then take, and the same on a plain
// outbox of the same rows, for the cost of 30 partitions.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const DAYS_BACK = 26; // With today and 3 ahead: 30 partitions.
const KEEP_CLOSED_FOR_MS = 86_400_000;

/** Partial indexes holding open rows only (due, leased, failed or dead), which a plan may read whole. */
const OPEN_ROW_INDEX =
  /(_lane_next_attempt_at_idx|_lane_locked_until_idx|_updated_at_idx1|_due_index|_lease_index|_problem_index)$/;

/**
 * The plan's scans that read a partition (or the plain table) whole: a sequential scan, or an index scan with no
 * condition, or one on the day alone (every row of a day's partition has it), but of the open rows' indexes.
 */
const wholeScans = (plan: string): string[] =>
  plan
    .split(/\n(?=\s*->)/)
    .map((node) => node.trim())
    .filter((node) => {
      const header = node.split('\n')[0];
      if (!/ on mail_outbox(_attempt|_feedback)?(_p\d+)?\b/.test(header)) return false;
      if (/Seq Scan/.test(header)) return true;
      const index = /(?:(?:Index Scan|Index Only Scan)(?: Backward)? using|Bitmap Index Scan on) (\w+)/.exec(
        header,
      )?.[1];
      if (index === undefined || OPEN_ROW_INDEX.test(index)) return false;
      const condition = /Index Cond: (.*)/.exec(node)?.[1];
      return condition === undefined || /^\(partition_day [<>=]+ \$\d+\)$/.test(condition);
    })
    .map((node) => node.split('\n')[0]);

describe.each([{ layout: 'partitioned' }, { layout: 'plain' }])('the claim and the settle, $layout', ({ layout }) => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    if (layout === 'partitioned') await partitionedSince(database.url, TABLES, DAYS_BACK);
    client = new pg.Client({ connectionString: database.url, options: CONNECTION_SETTINGS });
    await client.connect();
    await client.query('analyze');
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  it('reach every partition through its indexes, planned on empty tables', async () => {
    const { rows: partitions } = await client.query(
      `select count(*)::int as count from pg_inherits where inhparent = 'reliable_mail.mail_outbox'::regclass`,
    );
    expect(partitions[0].count).toBe(layout === 'partitioned' ? 30 : 0);
    const prepared = async (name: string, statement: Statement) => {
      await client.query(`prepare ${name} as ${statement.in(TABLES).text}`);
    };
    await prepared('claim', CLAIM);
    await prepared('settle', SETTLE);
    await prepared('move_forward', MOVE_FORWARD);
    const claimArgs = (limit: number) =>
      claimValues({
        lane: 'default',
        limit,
        lockToken: randomUUID(),
        workerId: 'w',
        leaseMs: 600_000,
        maxAgeMs: 86_400_000,
      });
    // Each planned (and the plan kept) while every table is empty and analysed.
    await client.query('begin');
    await client.query(`explain execute claim(${claimArgs(64).map(literal).join(', ')})`);
    await client.query('rollback');

    // 60,000 sent rows over the 30 days, each with an attempt; 2,000 due, most of them today, some kept from before.
    await client.query(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, partition_day, sent_at, updated_at)
       select gen_random_uuid(), g || '@plan.test', case when g % 30 = 0 then 'pending' else 'sent' end, 'default',
              '{"to": [{"address": "ann@example.com"}], "cc": [], "bcc": [], "text": "x"}', 5,
              case when g % 30 = 0 and g % 300 <> 0 then (now() at time zone 'utc')::date
                   else (now() at time zone 'utc')::date - (g % ${DAYS_BACK + 1}) end,
              now(), now() - interval '2 days'
       from generate_series(1, 60000) g;
       insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome, partition_day)
       select gen_random_uuid(), id, 1, 'w', gen_random_uuid(), 'sent', partition_day from mail_outbox
       where status = 'sent';
       analyze`,
    );

    await client.query('begin');
    const claimPlan = await explain(client, `execute claim(${claimArgs(64).map(literal).join(', ')})`);
    await client.query('rollback');
    expect(wholeScans(claimPlan)).toEqual([]);
    // The due rows in order from every partition's partial index.
    if (layout === 'partitioned') {
      expect(claimPlan).toMatch(/Merge Append[\s\S]*Index Scan using mail_outbox_p\d+_lane_next_attempt_at_idx/);
    }

    // Timed as the dispatcher runs them: a claim of 64, then their settle.
    const timings = { claim: [] as number[], settle: [] as number[] };
    let settlePlan = '';
    for (let run = 0; run < 10; run++) {
      const args = claimArgs(64);
      let started = performance.now();
      const { rows } = await client.query(`execute claim(${args.map(literal).join(', ')})`);
      timings.claim.push(performance.now() - started);
      expect(rows).toHaveLength(64);
      const inputs = rows.map((row: { id: string; attempt_id: string; day: string }) =>
        settleInputOf(
          sentSettlement({
            id: row.id,
            lockToken: args[2] as string,
            attemptId: row.attempt_id,
            partitionDay: row.day,
          }),
        ),
      );
      const values = settleValues(inputs, 30_000);
      const call = `execute settle(${literal(values[0])}, ${values[1] as number}, ${values
        .slice(2)
        .map(literal)
        .join(', ')})`;
      if (run === 0) {
        await client.query('begin');
        settlePlan = await explain(client, call);
        await client.query('rollback');
      }
      started = performance.now();
      const settled = await client.query(call);
      timings.settle.push(performance.now() - started);
      expect(new Set(settled.rows.map((row: { id: string }) => row.id)).size).toBe(64);
    }
    expect(wholeScans(settlePlan)).toEqual([]);

    if (layout === 'partitioned') {
      // The claimed rows here are of every day (the oldest due first), and the settle reads the days from the first
      // to the last of them. Rows of one day, as a drain's are (new mail is today's; retention moves kept rows
      // forward), have their settle read that day's partitions alone: the others are pruned as it starts.
      const oneDay = settleValues([settleInputOf(sentSettlement({ partitionDay: addDays(utcToday(), -3) }))], 30_000);
      await client.query('begin');
      const oneDayPlan = await explain(client, `execute settle(${oneDay.map(literal).join(', ')})`);
      await client.query('rollback');
      const scanned = (table: string) =>
        new Set(oneDayPlan.match(new RegExp(`Index Scan using ${table}_p\\d+_`, 'g'))).size;
      expect({ outbox: scanned('mail_outbox'), attempts: scanned('mail_outbox_attempt') }).toEqual({
        outbox: 1,
        attempts: 1,
      });

      // Retention's reads of a past day: the rows it moves forward, and the check before the drop, from the day's
      // partial indexes, not from its sent rows.
      const { rows: days } = await client.query(
        `select to_char(min(partition_day), 'YYYY-MM-DD') as first from mail_outbox`,
      );
      const first = days[0].first as string;
      const next = addDays(first, 1);
      await client.query('begin');
      const movePlan = await explain(client, `execute move_forward(${KEEP_CLOSED_FOR_MS}, null, '${next}', 500)`);
      await client.query('rollback');
      expect(wholeScans(movePlan)).toEqual([]);
      const partition = `reliable_mail.mail_outbox_p${first.replaceAll('-', '')}`;
      await client.query('begin');
      await client.query(`set local enable_seqscan = off`);
      const checkPlan = await explain(client, keptRowsCheck(partition, KEEP_CLOSED_FOR_MS));
      await client.query('rollback');
      expect(wholeScans(checkPlan)).toEqual([]);
      expect(checkPlan).not.toMatch(/Index (Only )?Scan using \w+_id_partition_day_idx/);
    }
    const median = (list: number[]) => [...list].sort((a, b) => a - b)[list.length >> 1].toFixed(1);
    console.log(
      `${layout === 'partitioned' ? 'over 30 partitions' : 'plain'} (60,000 rows): a claim of 64 took ${median(timings.claim)} ms (median of 10, ` +
        `max ${Math.max(...timings.claim).toFixed(1)}), their settle ${median(timings.settle)} ms ` +
        `(max ${Math.max(...timings.settle).toFixed(1)})`,
    );
  }, 120_000);
});

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return `'{${value.map((item) => JSON.stringify(item)).join(',')}}'`;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return `'${text.replaceAll("'", "''")}'`;
}

async function explain(client: pg.Client, call: string): Promise<string> {
  const { rows } = await client.query(`explain (costs off) ${call}`);
  return rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
}
