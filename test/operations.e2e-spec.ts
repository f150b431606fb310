import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import {
  EMAIL_SENT_EVENT,
  MailOutboxHealthIndicator,
  MailOutboxService,
  MailValidationError,
  OutboxRetention,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
const mail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks' };

describe('operating the outbox', () => {
  const bed = useTestBed();
  const start = bed.start;

  it('health: an SMTP outage shows as a growing backlog and a failing indicator, and recovers', async () => {
    let outage = true;
    const { outbox, health, app } = await start(
      { onRcptTo: () => (outage ? { code: 451, text: '4.3.0 Mail system temporarily unavailable' } : undefined) },
      { health: { maxBacklog: 3, maxLagMs: 60_000 }, retry: { baseDelayMs: 100, maxDelayMs: 200 } },
    );
    await waitFor('a dispatcher tick', async () => (await health.isHealthy()).mail.status === 'up');
    for (let index = 0; index < 5; index++) await outbox.enqueue({ ...mail, to: `user${index}@example.com` });

    await waitFor('the failures', () => app.events.failed.length >= 5);
    const during = await health.isHealthy();
    expect(during.mail).toMatchObject({ status: 'down', failing: ['backlog'], backlog: { count: 5, max: 3 } });
    expect((during.mail.backlog as { lagMs: number }).lagMs).toBeGreaterThan(0);

    outage = false;
    await waitFor('every mail sent', () => app.events.sent.length === 5, 20_000);
    const after = await health.isHealthy();
    expect(after.mail).toMatchObject({
      status: 'up',
      backlog: { count: 0, lagMs: 0 },
      deadLetters: { count: 0 },
      database: { reachable: true },
    });
    expect((after.mail.dispatcher as { idleMs: number }).idleMs).toBeLessThan(60_000);
  });

  it('health: a dispatcher whose first claim has not returned is up at start, and down once maxDispatcherIdleMs has passed', async () => {
    // SHARE mode conflicts with the claim's UPDATE but not with the health check's reads: every claim waits.
    const blocker = new pg.Client({ connectionString: bed.databaseUrl });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table mail_outbox in share mode');
    try {
      const { health } = await start({}, { health: { maxDispatcherIdleMs: 1_500 } });
      const atStart = await health.isHealthy();
      expect(atStart.mail).toMatchObject({ status: 'up', dispatcher: { lastActiveAt: expect.any(String) } });

      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const stuck = await health.isHealthy();
      expect(stuck.mail).toMatchObject({ status: 'down', failing: ['dispatcher'] });
    } finally {
      await blocker.query('rollback');
      await blocker.end();
    }
  });

  it('health: a lane whose every slot waits on a slow server, within the send deadline, is a slow server, not a dead dispatcher', async () => {
    // 1.8 s for each final dot: within the tests' 2 s socket timeout and 5 s send deadline.
    const smtp = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 1_800 }) });
    const app = await bed.startApp(
      testMailOptions(smtp.url, {
        lanes: { default: { concurrency: 2 } },
        health: { maxDispatcherIdleMs: 500 },
      }),
    );
    const outbox = app.get(MailOutboxService);
    // Two sending and two claimed ahead: the loop has no room to claim, so it waits for a slot without ticking.
    const recipients = ['ann', 'bob', 'eve', 'joe'].map((name) => `${name}@example.com`);
    for (const to of recipients) await outbox.enqueue({ ...mail, to });
    await waitFor('both slots waiting for the server', () => smtp.received.length === 2);

    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const busy = await app.get(MailOutboxHealthIndicator).isHealthy();
    expect(busy.mail.failing ?? []).not.toContain('dispatcher');
    expect((busy.mail.dispatcher as { idleMs: number }).idleMs).toBeLessThan(500);

    await waitFor('every mail sent', () => app.events.sent.length === 4, 20_000);
  });

  it('health: a lane held back to one send by a busy lane above it, that send waiting on a slow server, is not a dead dispatcher', async () => {
    // Every mail takes 1.8 s at the server (within the tests' 2 s socket timeout): the critical lane's one slot stays
    // busy for 5.4 s, and the bulk lane, held back, has its one send waiting and a row claimed ahead: it does not tick
    // meanwhile.
    const smtp = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 1_800 }) });
    const app = await bed.startApp(
      testMailOptions(smtp.url, {
        lanes: { critical: { concurrency: 1 }, bulk: { concurrency: 2 } },
        defaultLane: 'bulk',
        health: { maxDispatcherIdleMs: 500 },
      }),
    );
    const outbox = app.get(MailOutboxService);
    for (const name of ['login1', 'login2', 'login3'])
      await outbox.enqueue({ ...mail, to: `${name}@example.com` }, { lane: 'critical' });
    await waitFor('the critical lane busy', () => smtp.received.length === 1);
    await outbox.enqueueMany(
      ['ann', 'bob', 'eve', 'joe'].map((name) => ({ mail: { ...mail, to: `${name}@example.com` } })),
    );

    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const bulkAtServer = smtp.received.filter((message) => !message.recipients[0].startsWith('login')).length;
    const heldBack = await app.get(MailOutboxHealthIndicator).isHealthy();
    expect(bulkAtServer).toBe(1);
    expect(heldBack.mail.failing ?? []).not.toContain('dispatcher');

    await waitFor('every mail sent', () => app.events.sent.length === 7, 30_000);
  });

  it('health: an event whose listener hangs stays unconfirmed, and past maxEventAgeMs the indicator names it', async () => {
    const smtp = await bed.startSmtp();
    const app = await bed.startApp(
      testMailOptions(smtp.url, {
        events: { listenerTimeoutMs: 200 },
        health: { maxEventAgeMs: 2_000 },
      }),
      [HangingListener],
    );
    const health = app.get(MailOutboxHealthIndicator);
    await app.get(MailOutboxService).enqueue(mail);
    await waitFor('the listener to hear the event', () => app.get(HangingListener).heard > 0);
    expect((await health.isHealthy()).mail).toMatchObject({
      events: { oldestUnconfirmedName: EMAIL_SENT_EVENT, maxAgeMs: 2_000 },
    });

    await waitFor('the indicator to fail', async () => (await health.isHealthy()).mail.status === 'down');
    const stuck = (await health.isHealthy()).mail;
    expect(stuck).toMatchObject({ failing: ['events'], events: { oldestUnconfirmedName: EMAIL_SENT_EVENT } });
    expect((stuck.events as { oldestUnconfirmedAgeMs: number }).oldestUnconfirmedAgeMs).toBeGreaterThan(2_000);
  });

  it('shutdown lets a hung listener go after dispatcher.shutdownTimeoutMs; its event stays recorded for redelivery', async () => {
    const smtp = await bed.startSmtp();
    const app = await bed.startApp(
      testMailOptions(smtp.url, { events: { listenerTimeoutMs: 60_000 }, dispatcher: { shutdownTimeoutMs: 1_000 } }),
      [HangingListener],
    );
    const { id } = await app.get(MailOutboxService).enqueue(mail);
    await waitFor('the listener to hear the event', () => app.get(HangingListener).heard > 0);

    const closing = Date.now();
    await app.close();
    // The shutdown timeout, and at most the 5 s reliable-mail's connections get to close: not the listener's minute.
    expect(Date.now() - closing).toBeLessThan(1_000 + 5_000);
    expect(await bed.execute(`select name from mail_outbox_event where outbox_id = $1`, [id])).toEqual([
      { name: EMAIL_SENT_EVENT },
    ]);
  });

  it('health: dead letters in the window fail the indicator; a probe of the transports can be asked for', async () => {
    const { outbox, health, app } = await start(
      { onData: () => ({ code: 451, text: '4.3.0 Try again later' }) },
      { retry: { maxAgeMs: 200 } },
    );
    await outbox.enqueue(mail);
    await waitFor('the dead letter', () => app.events.failed.some((event) => event.deadLettered));
    const result = await health.isHealthy('mail', { verifyTransports: true });
    expect(result.mail).toMatchObject({
      status: 'down',
      failing: ['deadLetters'],
      deadLetters: { count: 1, max: 0 },
      transports: { reachable: true },
    });
    expect(result.mail).not.toHaveProperty('smtp');
    // The deprecated name still asks, and reports under the name it had.
    const deprecated = await health.isHealthy('mail', { verifySmtp: true });
    expect(deprecated.mail).toMatchObject({ smtp: { reachable: true } });
    expect(deprecated.mail).not.toHaveProperty('transports');

    await bed.smtp.close();
    const unreachable = await health.isHealthy('mail', { verifyTransports: true, maxDeadLetters: 1 });
    expect(unreachable.mail).toMatchObject({
      status: 'down',
      failing: ['transports'],
      transports: { reachable: false },
    });
  });

  it('stats count rows by status and lane, and the sends of the last minute', async () => {
    const { outbox, admin, app } = await start({
      onRcptTo: (to) => (to.startsWith('gone') ? { code: 550, text: '5.1.1 No such user' } : undefined),
    });
    await outbox.enqueue(mail, { lane: 'critical' });
    await outbox.enqueue({ ...mail, to: 'gone@example.com' });
    await outbox.enqueue(mail, { delayMs: 60_000 });
    await waitFor('two settles', () => app.events.sent.length + app.events.failed.length === 2);
    const stats = await admin.stats();
    expect(stats.counts).toEqual([
      { status: 'failed', lane: 'default', count: 1 },
      { status: 'pending', lane: 'default', count: 1 },
      { status: 'sent', lane: 'critical', count: 1 },
    ]);
    expect(stats).toMatchObject({
      backlog: 0,
      sent: { lastMinute: 1, lastHour: 1 },
      failed: { lastMinute: 1, lastHour: 1 },
    });
  });

  it('requeue: a dead letter goes out again with its id and Message-ID, the reason recorded', async () => {
    let broken = true;
    const { outbox, admin, app } = await start(
      { onData: () => (broken ? { code: 451, text: '4.3.0 Try again later' } : undefined) },
      { retry: { maxAgeMs: 200 } },
    );
    const { id, messageId } = await outbox.enqueue(mail, { metadata: { orderId: 7 } });
    await waitFor('the dead letter', () => app.events.failed.some((event) => event.deadLettered));
    await expect(admin.requeue({}, 'fixed')).rejects.toBeInstanceOf(MailValidationError);
    await expect(admin.requeue({ status: 'dead' }, '  ')).rejects.toMatchObject({ field: 'reason' });

    broken = false;
    expect(await admin.requeue({ metadata: { orderId: 7 } }, 'relay fixed, INC-42')).toEqual([id]);
    await waitFor('the requeued mail', () => app.events.sent.length === 1);
    const row = await admin.inspect(id);
    expect(row).toMatchObject({ status: 'sent', messageId, attempts: 1, requeueReason: 'relay fixed, INC-42' });
    expect(row.attemptLog.map((attempt) => attempt.outcome).at(-1)).toBe('sent');
    expect(new Set(row.attemptLog.slice(0, -1).map((attempt) => attempt.outcome))).toEqual(new Set(['transient']));
    expect(bed.smtp.received.map((message) => message.messageId)).toEqual([messageId]);
  });

  it('list, purge and export select rows by status, recipient, idempotency key and metadata', async () => {
    const { outbox, admin, app } = await start();
    await outbox.enqueue(mail, { idempotencyKey: 'order-1', metadata: { source: 'orders' } });
    await outbox.enqueue({ ...mail, to: 'Bob@Example.com' }, { metadata: { source: 'signup' } });
    await waitFor('both sent', () => app.events.sent.length === 2);
    const pending = await outbox.enqueue(mail, { delayMs: 60_000 });

    expect((await admin.list({ recipient: 'bob@example.com' })).map((row) => row.payload.to[0].address)).toEqual([
      'Bob@Example.com',
    ]);
    expect(await admin.list({ idempotencyKey: 'order-1' })).toHaveLength(1);
    expect((await admin.list({ status: 'pending' })).map((row) => row.id)).toEqual([pending.id]);
    const [first] = await admin.list({}, { limit: 1 });
    expect(first.id).toBe(pending.id);
    expect(await admin.list({}, { limit: 5, before: first.id })).toHaveLength(2);

    const lines: string[] = [];
    for await (const line of admin.exportJsonLines({
      from: new Date(Date.now() - 60_000),
      to: new Date(Date.now() + 1_000),
    }))
      lines.push(line);
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0])).toMatchObject({
      idempotencyKey: 'order-1',
      status: 'sent',
      attemptLog: [{ outcome: 'sent' }],
    });

    await expect(admin.purge({})).rejects.toBeInstanceOf(MailValidationError);
    expect(await admin.purge({ metadata: { source: 'signup' } })).toBe(1);
    expect(await admin.purge({ ids: [pending.id] })).toBe(0);
    expect(await admin.list()).toHaveLength(2);
  });

  it('retention deletes old closed rows in batches and keeps dead letters', async () => {
    const { outbox, app, em } = await start(
      {},
      { retention: { enabled: false, batchSize: 2, keepClosedForMs: 86_400_000 } },
    );
    for (let index = 0; index < 5; index++) await outbox.enqueue({ ...mail, to: `user${index}@example.com` });
    await waitFor('five sent', () => app.events.sent.length === 5);
    const recent = await outbox.enqueue(mail);
    await waitFor('six sent', () => app.events.sent.length === 6);
    await em.execute(`update mail_outbox set updated_at = now() - interval '2 days' where id <> ?`, [recent.id]);
    await em.execute(
      `update mail_outbox set status = 'dead' where id = (select id from mail_outbox where id <> ? limit 1)`,
      [recent.id],
    );

    expect(await app.get(OutboxRetention).run()).toBe(4);
    const rows = await em.execute<{ status: string }[]>(`select status from mail_outbox order by status`);
    expect(rows.map((row) => row.status)).toEqual(['dead', 'sent']);
    const [{ attempts }] = await em.execute(`select count(*)::int as attempts from mail_outbox_attempt`);
    expect(attempts).toBe(2);
  });

  it('suppression: a hard bounce lists the address; a later mail to it ends as suppressed without an SMTP attempt', async () => {
    const { outbox, admin, app } = await start({
      onRcptTo: (to) => (to === 'gone@example.com' ? { code: 550, text: '5.1.1 No such user' } : undefined),
    });
    await outbox.enqueue({ ...mail, to: 'gone@example.com' });
    await waitFor('the bounce', () => app.events.failed.length === 1);
    expect(await admin.listSuppressions()).toEqual([
      expect.objectContaining({
        address: 'gone@example.com',
        source: 'bounce',
        reason: expect.stringContaining('5.1.1'),
      }),
    ]);

    const connectionsBefore = bed.smtp.received.length;
    const suppressed = await outbox.enqueue({ ...mail, to: 'Gone@Example.com' });
    await waitFor('the suppressed event', () => app.events.failed.length === 2);
    expect(app.events.failed[1]).toMatchObject({ id: suppressed.id, status: 'suppressed', attempt: 0 });
    expect(await admin.inspect(suppressed.id)).toMatchObject({ status: 'suppressed', attempts: 0, attemptLog: [] });
    expect(bed.smtp.received.length).toBe(connectionsBefore);

    const mixed = await outbox.enqueue({ ...mail, to: ['gone@example.com', 'ann@example.com'] });
    await waitFor('the mixed mail', () => app.events.sent.length === 1);
    expect(bed.smtp.received.at(-1)!.recipients).toEqual(['ann@example.com']);
    expect((await admin.inspect(mixed.id)).rejectedRecipients).toEqual([
      { address: 'gone@example.com', reply: 'suppressed: not sent', replyCode: null },
    ]);

    const twice = await outbox.enqueue({ ...mail, to: 'gone@example.com', cc: 'GONE@example.com' });
    await waitFor('the second suppressed event', () => app.events.failed.length === 3);
    expect(await admin.inspect(twice.id)).toMatchObject({ status: 'suppressed', attemptLog: [] });

    await admin.suppress('eve@example.com', 'asked to be removed');
    expect(await admin.unsuppress('GONE@example.com')).toBe(true);
    expect((await admin.listSuppressions()).map((entry) => [entry.address, entry.source])).toEqual([
      ['eve@example.com', 'operator'],
    ]);
    await outbox.enqueue({ ...mail, to: 'gone@example.com' });
    await waitFor('the next bounce', () => app.events.failed.length === 4);
    expect(app.events.failed[3]).toMatchObject({ permanent: true, replyCode: 550 });
  });

  it.each<{ name: string; filter: Record<string, unknown>; field: string }>([
    { name: 'an empty lane', filter: { lane: '' }, field: 'filter.lane' },
    { name: 'an empty recipient', filter: { recipient: '' }, field: 'filter.recipient' },
    { name: 'a null status', filter: { status: null }, field: 'filter.status' },
    { name: 'an empty list of statuses', filter: { status: [] }, field: 'filter.status' },
    { name: 'an unknown status', filter: { status: 'lost' }, field: 'filter.status' },
    { name: 'an empty list of ids', filter: { ids: [] }, field: 'filter.ids' },
    { name: 'empty metadata', filter: { metadata: {} }, field: 'filter.metadata' },
    { name: 'an invalid date', filter: { createdAfter: new Date('nope') }, field: 'filter.createdAfter' },
    { name: 'an unknown field', filter: { lanes: 'bulk' }, field: 'filter.lanes' },
    { name: 'no field at all', filter: {}, field: 'filter' },
  ])('requeue and purge refuse a filter with $name, which would match every row', async ({ filter, field }) => {
    const { outbox, admin } = await start();
    await outbox.enqueue(mail, { delayMs: 60_000 });
    await expect(admin.requeue(filter as never, 'a reason')).rejects.toMatchObject({ field });
    await expect(admin.purge(filter as never)).rejects.toMatchObject({ field });
    await expect(admin.purge(filter as never, { dryRun: true })).rejects.toMatchObject({ field });
  });

  it('a dry run of requeue and purge counts the rows without touching them', async () => {
    const { outbox, admin, app } = await start({
      onRcptTo: (to) => (to.startsWith('gone') ? { code: 550, text: '5.7.1 Refused by policy' } : undefined),
    });
    const failed = await outbox.enqueue({ ...mail, to: 'gone1@example.com' });
    await outbox.enqueue({ ...mail, to: 'gone2@example.com' });
    await outbox.enqueue(mail);
    await waitFor('three settled', () => app.events.failed.length === 2 && app.events.sent.length === 1);

    expect((await admin.requeue({ status: 'failed' }, 'checking', { dryRun: true })).sort()).toHaveLength(2);
    expect(await admin.purge({ status: ['failed', 'sent'] }, { dryRun: true })).toBe(3);
    expect((await admin.inspect(failed.id)).status).toBe('failed');
    expect(await admin.list({ status: ['failed', 'sent'] })).toHaveLength(3);
  });

  it('a suppressed row goes out again when its address is taken off the list and the row requeued', async () => {
    const { outbox, admin, app } = await start();
    await admin.suppress('ann@example.com', 'bounced last year');
    const { id } = await outbox.enqueue(mail);
    await waitFor('the suppressed event', () => app.events.failed.some((event) => event.status === 'suppressed'));
    expect(await admin.unsuppress('ann@example.com')).toBe(true);
    expect(await admin.requeue({ ids: [id] }, 'the address works again')).toEqual([id]);
    await waitFor('the sent event', () => app.events.sent.length === 1);
    expect((await admin.inspect(id)).status).toBe('sent');
  });

  it('rows in a lane that is no longer declared are named by the health indicator', async () => {
    const { outbox, health } = await start();
    const { id } = await outbox.enqueue(mail, { delayMs: 60_000 });
    await bed.execute(`update mail_outbox set lane = 'newsletter', next_attempt_at = now() where id = $1`, [id]);
    const { mail: status } = await health.isHealthy('mail');
    expect(status).toMatchObject({
      status: 'down',
      failing: expect.arrayContaining(['undeclaredLanes']),
      undeclaredLanes: { newsletter: 1 },
    });
  });
});

/** A listener that never finishes: its event is never confirmed. */
@Injectable()
class HangingListener {
  heard = 0;

  @OnEvent(EMAIL_SENT_EVENT)
  onSent(): Promise<void> {
    this.heard += 1;
    return new Promise(() => undefined);
  }
}
