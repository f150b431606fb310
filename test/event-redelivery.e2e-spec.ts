import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { EMAIL_SENT_EVENT, type EmailSentEvent, MailOutboxService } from '@reliable-mail/nestjs';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { createTestApp, migrate, spawnDispatcherProcess, testMailOptions, waitFor } from './support/test-app.js';
import { SmtpTestServer } from './support/smtp-test-server.js';

describe('events survive a crash between the status commit and the emission', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: Awaited<ReturnType<typeof createTestApp>> | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    smtp = new SmtpTestServer();
    await smtp.listen();
  });

  afterAll(async () => {
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('emits EmailSentEvent after restart when the process died while emitting it', async () => {
    const producer = await createTestApp(database.url, testMailOptions(smtp.url, { dispatcher: { enabled: false } }));
    const { id, messageId } = await producer
      .get(MailOutboxService)
      .enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
    await producer.close();

    const { child, lines } = await spawnDispatcherProcess({
      databaseUrl: database.url,
      smtpUrl: smtp.url,
      crashOnSentEvent: true,
    });
    const exit = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.once('exit', (_code, signal) => resolve(signal)),
    );
    expect(exit).toBe('SIGKILL');
    expect(lines).toContain(`sent-event ${id}`);

    app = await createTestApp(database.url, testMailOptions(smtp.url));
    const [{ status }] = await app.get(EntityManager).execute(`select status from mail_outbox where id = ?`, [id]);
    expect(status).toBe('sent');

    await waitFor('the redelivered EmailSentEvent', () => app!.events.sent.length === 1);
    expect(app.events.sent[0]).toMatchObject({ id, messageId, attempt: 1 });
    expect(app.events.sent[0].sentAt).toBeInstanceOf(Date);
    await waitFor('the event to be confirmed', async () => {
      const [{ count }] = await app!.get(EntityManager).execute(`select count(*)::int as count from mail_outbox_event`);
      return count === 0;
    });
    expect(smtp.received).toHaveLength(1);
  });

  it('emits the event again when a listener with suppressErrors: false throws', async () => {
    await app?.close();
    app = await createTestApp(database.url, testMailOptions(smtp.url), [FlakyListener]);
    const { id } = await app.get(MailOutboxService).enqueue({ to: 'bob@example.com', subject: 'Hi', text: 'x' });
    const listener = app.get(FlakyListener);
    await waitFor(
      'the second delivery of the event',
      () => listener.calls.filter((call) => call === id).length === 2,
      10_000,
    );
    await waitFor('the event to be confirmed', async () => {
      const [{ count }] = await app!.get(EntityManager).execute(`select count(*)::int as count from mail_outbox_event`);
      return count === 0;
    });
  });
});

/** Throws the first time it hears of a row, as a listener whose database was briefly down would. */
@Injectable()
class FlakyListener {
  readonly calls: string[] = [];

  @OnEvent(EMAIL_SENT_EVENT, { suppressErrors: false })
  onSent(event: EmailSentEvent): void {
    this.calls.push(event.id);
    if (this.calls.filter((call) => call === event.id).length === 1) throw new Error('listener failed once');
  }
}
