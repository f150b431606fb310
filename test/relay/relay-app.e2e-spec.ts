import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { EMAIL_SENT_EVENT, MailOutboxHealthIndicator, MailOutboxService } from '@reliable-mail/nestjs';
import { KeepingDestination } from '../support/keeping-destination.js';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { createTestApp, migrate, testMailOptions, waitFor } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

describe('an app relaying its events', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  const apps: Array<Awaited<ReturnType<typeof createTestApp>>> = [];

  const start = async (...args: Parameters<typeof createTestApp>) => {
    const app = await createTestApp(...args);
    apps.push(app);
    return app;
  };

  const count = async (app: Awaited<ReturnType<typeof createTestApp>>, table: string): Promise<number> => {
    const [{ count }] = await app.get(EntityManager).execute(`select count(*)::int as count from ${table}`);
    return count;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    smtp = new SmtpTestServer();
    await smtp.listen();
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    const cleanup = await createTestApp(database.url, testMailOptions(smtp.url, { dispatcher: { enabled: false } }));
    await cleanup.get(EntityManager).execute('truncate mail_outbox, mail_relay, mail_relay_destination cascade');
    await cleanup.close();
  });

  afterAll(async () => {
    await smtp?.close();
    await database?.drop();
  });

  it('publishes every sent event once its broker confirms, keeping none for listeners nobody has', async () => {
    const destination = new KeepingDestination();
    const app = await start(
      database.url,
      testMailOptions(smtp.url, { relay: { destinations: [destination], pollIntervalMs: 100 } }),
      [],
      { eventRecorder: false },
    );
    expect(destination.opened).toBe(true);
    const outbox = app.get(MailOutboxService);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push((await outbox.enqueue({ to: `r${i}@example.com`, subject: 'Hi', text: 'x' })).id);

    await waitFor('every sent event published', () => destination.published.length === 20);
    expect(new Set(destination.published.map((event) => event.mailId))).toEqual(new Set(ids));
    for (const event of destination.published) {
      expect(event).toMatchObject({ name: EMAIL_SENT_EVENT, messageId: `${event.mailId}:${event.eventId}` });
      expect(event.payload).toMatchObject({ id: event.mailId });
    }
    await waitFor('the copies deleted once confirmed', async () => (await count(app, 'mail_relay')) === 0);
    // Nothing in this app listens: the relay's events are not kept for listeners.
    expect(await count(app, 'mail_outbox_event')).toBe(0);
    await app.close();
    apps.splice(0);
    expect(destination.closed).toBe(true);
  });

  it('an event its broker keeps refusing waits alone, and health says so past maxBacklogAgeMs', async () => {
    const destination = new KeepingDestination();
    const app = await start(
      database.url,
      testMailOptions(smtp.url, { relay: { destinations: [destination], pollIntervalMs: 100, maxBacklogAgeMs: 1 } }),
    );
    const outbox = app.get(MailOutboxService);
    const poison = await outbox.enqueue({ to: 'poison@example.com', subject: 'Hi', text: 'x' });
    destination.refused.add(poison.id);
    const others: string[] = [];
    for (let i = 0; i < 10; i++)
      others.push((await outbox.enqueue({ to: `o${i}@example.com`, subject: 'Hi', text: 'x' })).id);

    await waitFor('the other events published', () => destination.published.length === 10);
    expect(destination.published.map((event) => event.mailId).sort()).toEqual([...others].sort());
    const [copy] = await app
      .get(EntityManager)
      .execute<Array<{ outbox_id: string; last_error: string }>>('select outbox_id, last_error from mail_relay');
    expect(copy).toMatchObject({ outbox_id: poison.id, last_error: 'message too large' });

    const { mail } = await app.get(MailOutboxHealthIndicator).isHealthy('mail');
    expect(mail.status).toBe('down');
    expect(mail.failing).toContain('relay');
    expect(mail.relay.destinations.keeping).toMatchObject({ owed: 1 });

    destination.refused.clear();
    await waitFor('the refused event published once taken', () => destination.published.length === 11, 15_000);
  });

  it('an instance without the relay still records the events of a destination another one registered', async () => {
    // Registers the destination, and sends nothing.
    await start(
      database.url,
      testMailOptions(smtp.url, {
        dispatcher: { enabled: false },
        relay: { destinations: [new KeepingDestination()] },
      }),
    );
    const sender = await start(database.url, testMailOptions(smtp.url), [], { eventRecorder: false });
    const outbox = sender.get(MailOutboxService);
    for (let i = 0; i < 5; i++) await outbox.enqueue({ to: `s${i}@example.com`, subject: 'Hi', text: 'x' });

    await waitFor('the copies owed to the destination', async () => (await count(sender, 'mail_relay')) === 5);
    expect(await count(sender, 'mail_outbox_event')).toBe(0);

    // Nobody has published to it for an hour (the instance that named it sends nothing): its backlog only grows.
    await sender.get(EntityManager).execute(`update mail_relay_destination set seen_at = now() - interval '1 hour'`);
    const { mail } = await sender.get(MailOutboxHealthIndicator).isHealthy('mail');
    expect(mail.failing).toContain('relay');
    expect(mail.relay.abandoned).toEqual({ keeping: 5 });
  });
});
