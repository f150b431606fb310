import { beforeEach, describe, expect, it } from '@jest/globals';
import { MailOutboxAdmin, MailOutboxService, OutboxFilterError } from '@reliable-mail/nestjs';
import { ConsoleReader } from '../libs/reliable-mail/src/console/console-reader.js';
import type { ConsoleFilter } from '../libs/reliable-mail/src/console/console-data.types.js';
import { listAudit, recordAudit } from '../libs/reliable-mail/src/console/sql/audit.js';
import { consoleCounts } from '../libs/reliable-mail/src/console/sql/counts.js';
import { mailPage } from '../libs/reliable-mail/src/console/sql/mails.js';
import type { SqlClient, Statement } from '../libs/reliable-mail/src/database/sql-client.js';
import { uuidv7 } from '../libs/reliable-mail/src/outbox/uuid-v7.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { testMailOptions } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const mail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks' };

describe("the console's reads", () => {
  const bed = useTestBed();

  beforeEach(async () => {
    await bed.execute('truncate mail_console_audit, mail_instance');
  });

  /** An app without a dispatcher, so that the rows stay as the test puts them, and the console's reader. */
  async function start(): Promise<{ reader: ConsoleReader; outbox: MailOutboxService; db: SqlClient }> {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }), [], {
      scheduler: false,
    });
    const outbox = app.get(MailOutboxService);
    return { reader: new ConsoleReader(outbox), outbox, db: await outbox.statements() };
  }

  const ids = (page: { items: Array<{ id: string }> }) => page.items.map((item) => item.id);

  it('finds mails by each field of the filter, newest first, with the columns of the list', async () => {
    const { reader, outbox } = await start();
    const ann = await outbox.enqueue(
      { ...mail, cc: 'Carl@Example.com', bcc: 'audit@example.com' },
      { metadata: { orderId: 1, tenant: 'acme' }, idempotencyKey: 'order-1' },
    );
    const bob = await outbox.enqueue(
      { to: ['bob@example.com', 'Dora@example.com'], subject: 'Shipped', text: 'On its way' },
      { metadata: { orderId: 2, tenant: 'acme' } },
    );
    const eve = await outbox.enqueue({ to: 'eve@example.com', subject: 'Refund', text: 'Done' }, { lane: 'bulk' });
    await bed.execute(`update mail_outbox set status = 'sent', provider_message_id = 'prov-1' where id = $1`, [ann.id]);
    await bed.execute(
      `update mail_outbox set status = 'dead', last_error = '550 no', provider_message_ids = array['req-a', 'req-b']
       where id = $1`,
      [bob.id],
    );
    // Eve's mail as it would be had it been enqueued two days ago: its id (UUIDv7) is of the time it was made.
    const eveId = uuidv7(Date.now() - 2 * 86_400_000);
    await bed.execute(
      `update mail_outbox set id = $2::uuid, message_id = '<' || $2::text || '@test.example.com>', created_at = now() - interval '2 days'
       where id = $1`,
      [eve.id, eveId],
    );
    eve.id = eveId;

    const cases: Array<[ConsoleFilter, string[]]> = [
      [{}, [bob.id, ann.id, eve.id]],
      [{ status: 'dead' }, [bob.id]],
      [{ status: ['sent', 'pending'] }, [ann.id, eve.id]],
      [{ lane: 'bulk' }, [eve.id]],
      [{ recipient: 'ANN@example.com' }, [ann.id]],
      [{ recipient: 'carl@example.COM' }, [ann.id]],
      [{ recipient: 'Audit@Example.com' }, [ann.id]],
      [{ recipient: 'dora@example.com' }, [bob.id]],
      [{ recipient: 'nobody@example.com' }, []],
      [{ idempotencyKey: 'order-1' }, [ann.id]],
      [{ metadata: { tenant: 'acme' } }, [bob.id, ann.id]],
      [{ metadata: { orderId: 2 } }, [bob.id]],
      [{ metadata: { tenant: 'acme' }, status: 'sent' }, [ann.id]],
      [{ createdAfter: new Date(Date.now() - 86_400_000) }, [bob.id, ann.id]],
      [{ createdBefore: new Date(Date.now() - 86_400_000) }, [eve.id]],
      [{ ids: [ann.id, eve.id] }, [ann.id, eve.id]],
      [{ messageId: bob.messageId }, [bob.id]],
      [{ messageId: bob.messageId.slice(1, -1).toUpperCase() }, [bob.id]],
      [{ messageId: `<${bob.id}>` }, []],
      [{ messageId: '<something@elsewhere.example>' }, []],
      [{ messageId: 'not a message id' }, []],
      [{ providerMessageId: 'prov-1' }, [ann.id]],
      [{ providerMessageId: 'req-b' }, [bob.id]],
      [{ providerMessageId: 'prov-2' }, []],
    ];
    for (const [filter, expected] of cases) {
      expect([filter, ids(await reader.mails(filter))]).toEqual([filter, expected]);
    }

    const { items } = await reader.mails({ ids: [ann.id, bob.id] });
    expect(items).toEqual([
      {
        id: bob.id,
        status: 'dead',
        lane: 'default',
        subject: 'Shipped',
        template: null,
        to: ['bob@example.com', 'Dora@example.com'],
        attempts: 0,
        createdAt: expect.any(Date),
        lastError: '550 no',
        metadata: { orderId: 2, tenant: 'acme' },
      },
      expect.objectContaining({ id: ann.id, status: 'sent', to: ['ann@example.com'], lastError: null }),
    ]);
  });

  it('refuses a filter as the admin does, and the admin still refuses the fields only the console has', async () => {
    const { reader } = await start();
    const admin = (
      await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }), [], {
        scheduler: false,
      })
    ).get(MailOutboxAdmin);
    for (const [filter, field] of [
      [{ lane: '' }, 'filter.lane'],
      [{ metadata: { orderId: undefined } }, 'filter.metadata.orderId'],
      [{ messageId: ' ' }, 'filter.messageId'],
      [{ providerMessageId: 42 }, 'filter.providerMessageId'],
      [{ sender: 'x' }, 'filter.sender'],
    ] as Array<[ConsoleFilter, string]>) {
      await expect(reader.mails(filter)).rejects.toEqual(expect.objectContaining({ field }));
      await expect(reader.mails(filter)).rejects.toBeInstanceOf(OutboxFilterError);
    }
    await expect(reader.mails({}, { before: 'not-a-uuid' })).rejects.toMatchObject({ field: 'page.before' });
    await expect(reader.mails({}, { limit: 0 })).rejects.toMatchObject({ field: 'page.limit' });
    await expect(admin.list({ messageId: '<x@y>' } as never)).rejects.toMatchObject({ field: 'filter.messageId' });
  });

  it('pages on with next until the last page, each row once, newest first', async () => {
    const { reader, outbox } = await start();
    const enqueued: string[] = [];
    for (let index = 0; index < 7; index++) enqueued.push((await outbox.enqueue(mail)).id);
    const seen: string[] = [];
    const sizes: number[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await reader.mails({ recipient: 'ann@example.com' }, { limit: 3, before });
      seen.push(...ids(page));
      sizes.push(page.items.length);
      if (page.next === null) break;
      expect(page.next).toBe(page.items[page.items.length - 1].id);
      before = page.next;
    }
    expect(sizes).toEqual([3, 3, 1]);
    // Newest first by id: two enqueues in one millisecond have ids in either order (UUIDv7 is ordered to the ms).
    expect(seen).toEqual([...enqueued].sort().reverse());
    // A page that ends exactly at the last row says so.
    expect((await reader.mails({}, { limit: 7 })).next).toBeNull();
  });

  it('counts rows by status and lane as SQL does, and estimates the sent ones from the statistics', async () => {
    const { reader, outbox, db } = await start();
    for (let index = 0; index < 30; index++) {
      await outbox.enqueue(mail, { lane: ['default', 'bulk', 'critical'][index % 3] });
    }
    await bed.execute(`update mail_outbox set status = (array['sent', 'sent', 'sent', 'sent', 'failed', 'dead',
      'cancelled', 'expired', 'suppressed', 'sending', 'pending'])[1 + get_byte(uuid_send(id), 15) % 11]`);
    const expected = await bed.execute(
      `select status, lane, count(*)::int as count, false as estimated from mail_outbox group by status, lane
       order by status, lane`,
    );
    const overview = await reader.overview();
    expect(overview.counts).toEqual(expected);

    // With statistics (ANALYZE reads every row of a table this small), above the limit the sent rows are the
    // estimate, marked so; the others are still counted.
    await bed.execute('analyze mail_outbox');
    const estimated = await consoleCounts(db, 0);
    const sent = (rows: Array<{ status: string }>) => rows.filter((row) => row.status === 'sent');
    expect(sent(estimated)).toEqual(
      sent(expected as Array<{ status: string }>).map((row) => ({ ...row, estimated: true })),
    );
    expect(estimated.filter((row) => row.status !== 'sent')).toEqual(
      (expected as Array<{ status: string }>).filter((row) => row.status !== 'sent'),
    );
  });

  it('shows the backlog, dead letters, suppressions, instances and each minute of the window', async () => {
    const { reader, outbox } = await start();
    const rows: string[] = [];
    for (let index = 0; index < 8; index++) rows.push((await outbox.enqueue(mail)).id);
    // Minute -3: two sent (latency 1 s and 3 s), one failed; minute -2: one sent (2 s), one dead; an attempt
    // deferred in minute -2, and one in minute -1 ending in a partial; one pending due, one scheduled, one sending.
    const at = (minutesAgo: number, plusSeconds = 0) =>
      `date_trunc('minute', now()) - interval '${minutesAgo} minutes' + interval '${plusSeconds} seconds'`;
    const set = (id: string, sql: string) => bed.execute(`update mail_outbox set ${sql} where id = $1`, [id]);
    await set(rows[0], `status = 'sent', sent_at = ${at(3, 10)}, created_at = ${at(3, 9)}`);
    await set(rows[1], `status = 'sent', sent_at = ${at(3, 20)}, created_at = ${at(3, 17)}`);
    await set(rows[2], `status = 'failed', updated_at = ${at(3, 30)}`);
    await set(rows[3], `status = 'sent', sent_at = ${at(2, 5)}, created_at = ${at(2, 3)}`);
    await set(rows[4], `status = 'dead', updated_at = ${at(2, 6)}`);
    await set(rows[5], `next_attempt_at = now() + interval '1 hour'`);
    await set(rows[6], `status = 'sending'`);
    await set(rows[7], `next_attempt_at = now() - interval '5 minutes'`);
    for (const [minutesAgo, outcome] of [
      [2, 'transient'],
      [1, 'partial'],
      [1, 'sent'],
      [500, 'transient'],
    ] as const) {
      await bed.execute(
        `insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, started_at, finished_at, outcome)
         values ($1, $2, 1, 'test:1', gen_random_uuid(), ${at(minutesAgo, 1)}, ${at(minutesAgo, 2)}, $3)`,
        [uuidv7(), rows[0], outcome],
      );
    }
    await bed.execute(
      `insert into mail_suppression (address, reason, source) values ('x@example.com', 'x', 'operator')`,
    );
    await bed.execute(
      `insert into mail_instance (id, host, pid, started_at, heartbeat_at, heartbeat_ms, lanes) values
       ('a', 'host-a', 1, now() - interval '1 hour', now() - interval '40 seconds', 60000, '{"default": {"state": "running", "reason": null, "until": null, "inFlight": 2}}'),
       ('b', 'host-b', 2, now() - interval '2 hours', now() - interval '40 seconds', 10000, '{}')`,
    );

    const overview = await reader.overview(1);
    expect(overview).toMatchObject({ backlog: 2, deadLetters: 1, suppressions: 1 });
    expect(overview.oldestDueAt!.getTime()).toBeLessThan(Date.now() - 290_000);
    expect(overview.lagMs).toBeGreaterThanOrEqual(290_000);
    expect(overview.instances).toEqual([
      expect.objectContaining({ id: 'b', host: 'host-b', pid: 2, stale: true, lanes: {} }),
      expect.objectContaining({
        id: 'a',
        stale: false,
        startedAt: expect.any(Date),
        lanes: { default: { state: 'running', reason: null, until: null, inFlight: 2 } },
      }),
    ]);
    expect(overview.minutes.length).toBeGreaterThanOrEqual(61);
    expect(overview.minutes.length).toBeLessThanOrEqual(62);
    const minutes = overview.minutes.slice(-4);
    expect(
      minutes.map(({ sent, failed, deferred, latencyP50Ms, latencyP95Ms }) => ({
        sent,
        failed,
        deferred,
        latencyP50Ms,
        latencyP95Ms,
      })),
    ).toEqual([
      { sent: 2, failed: 1, deferred: 0, latencyP50Ms: 2_000, latencyP95Ms: 2_900 },
      { sent: 1, failed: 1, deferred: 1, latencyP50Ms: 2_000, latencyP95Ms: 2_000 },
      { sent: 0, failed: 0, deferred: 1, latencyP50Ms: null, latencyP95Ms: null },
      { sent: 0, failed: 0, deferred: 0, latencyP50Ms: null, latencyP95Ms: null },
    ]);
    expect(minutes.map((minute) => minute.minute.getTime() % 60_000)).toEqual([0, 0, 0, 0]);
    expect(overview.minutes.slice(0, -4).every((minute) => minute.sent + minute.failed + minute.deferred === 0)).toBe(
      true,
    );
    await expect(reader.overview(0)).rejects.toMatchObject({ field: 'hours' });
  });

  it("shows a mail's timeline: its attempts, feedback, pending events, audit entries and trace context", async () => {
    const { reader, outbox, db } = await start();
    const { id } = await outbox.enqueue(mail);
    const other = await outbox.enqueue(mail);
    await bed.execute(
      `update mail_outbox set status = 'sent', attempts = 2, traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
       where id = $1`,
      [id],
    );
    for (const [attempt, outcome] of [
      [1, 'transient'],
      [2, 'sent'],
    ] as const) {
      await bed.execute(
        `insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, started_at, finished_at, outcome)
         values ($1, $2, $3, 'test:1', gen_random_uuid(), now() - interval '1 minute' * (3 - $3), now(), $4)`,
        [uuidv7(), id, attempt, outcome],
      );
    }
    await bed.execute(
      `insert into mail_outbox_feedback (id, outbox_id, source, recipient, kind, provider_event_id, reported_at, payload)
       values ($1, $2, 'ses', 'ann@example.com', 'delivered', 'event-1', now(), '{}')`,
      [uuidv7(), id],
    );
    await bed.execute(
      `insert into mail_outbox_event (outbox_id, name, payload, locked_until) values
       ($1, 'reliable-mail.email.sent', '{}', now() + interval '1 minute'), ($2, 'reliable-mail.email.sent', '{}', now())`,
      [id, other.id],
    );
    const first = await recordAudit(db, {
      actor: 'ops@example.com',
      action: 'requeue',
      reason: 'the server was down',
      filter: { status: 'dead' },
      outboxIds: [other.id, id],
    });
    await recordAudit(db, {
      actor: 'ops@example.com',
      action: 'cancel',
      reason: null,
      filter: null,
      outboxIds: [other.id],
    });
    const last = await recordAudit(db, {
      actor: 'lea@example.com',
      action: 'cancel',
      reason: 'asked to',
      filter: null,
      outboxIds: [id],
    });

    const timeline = await reader.timeline(id);
    expect(timeline).toEqual({
      row: expect.objectContaining({ id, status: 'sent', attempts: 2 }),
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      events: [
        {
          id: expect.stringMatching(/^\d+$/),
          name: 'reliable-mail.email.sent',
          createdAt: expect.any(Date),
          lockedUntil: expect.any(Date),
        },
      ],
      audit: [last, first],
    });
    expect(timeline!.row.attemptLog.map((attempt) => [attempt.attempt, attempt.outcome])).toEqual([
      [1, 'transient'],
      [2, 'sent'],
    ]);
    expect(timeline!.row.feedback).toEqual([
      expect.objectContaining({ kind: 'delivered', recipient: 'ann@example.com' }),
    ]);
    expect(first).toEqual({
      id: expect.any(String),
      actor: 'ops@example.com',
      action: 'requeue',
      reason: 'the server was down',
      filter: { status: 'dead' },
      rows: 2,
      firstOutboxId: other.id,
      createdAt: expect.any(Date),
    });
    expect(await reader.timeline(uuidv7())).toBeNull();
    expect(await reader.timeline('not-a-uuid')).toBeNull();

    const audit = await listAudit(db, 2);
    expect(audit.map((entry) => entry.action)).toEqual(['cancel', 'cancel']);
    expect((await reader.audit({ before: audit[1].id })).map((entry) => entry.id)).toEqual([first.id]);
  });

  it('finds a recipient and metadata through their indexes', async () => {
    const { db } = await start();
    await bed.execute(
      `insert into mail_outbox (id, message_id, status, payload, metadata, max_attempts)
       select id, '<' || id || '@test.example.com>', 'sent',
              jsonb_build_object('v', 1, 'to', jsonb_build_array(jsonb_build_object('address', 'user' || g || '@example.com')),
                                 'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'subject', 'Hi'),
              jsonb_build_object('orderId', g), 8
       from (select gen_random_uuid() as id, g from generate_series(1, 5000) g) r`,
    );
    await bed.execute('analyze mail_outbox');
    const plan = async (filter: ConsoleFilter): Promise<string> => {
      const recorded: Array<{ text: string; values: readonly unknown[] }> = [];
      const recorder: SqlClient = {
        query(statement: Statement, values: readonly unknown[]) {
          recorded.push({ text: statement.in(tablesIn(DEFAULT_SCHEMA)).text, values });
          return db.query(statement, values);
        },
      };
      await mailPage(recorder, filter, 50);
      const rows = (await bed.execute(`explain ${recorded[0].text}`, [...recorded[0].values])) as Array<{
        'QUERY PLAN': string;
      }>;
      return rows.map((row) => row['QUERY PLAN']).join('\n');
    };
    expect(await plan({ recipient: 'User42@example.com' })).toMatch(
      /Bitmap Index Scan on mail_outbox_recipients_index/,
    );
    expect(await plan({ metadata: { orderId: 42 } })).toMatch(/Bitmap Index Scan on mail_outbox_metadata_index/);
  });
});
