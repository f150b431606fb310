import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { EventEmitter2, OnEvent } from '@nestjs/event-emitter';
import {
  EMAIL_FAILED_EVENT,
  EMAIL_SENT_EVENT,
  type EmailFailedEvent,
  type EmailSentEvent,
  MailOutboxAdmin,
  MailOutboxService,
} from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

/** Throws the first time it hears each event, so that it comes again: the second must carry the same id. */
@Injectable()
class FirstTimeThrows {
  readonly heard: Array<{ eventId: string; id: string }> = [];

  @OnEvent(EMAIL_SENT_EVENT, { suppressErrors: false })
  onSent(event: EmailSentEvent): void {
    this.heard.push({ eventId: event.eventId, id: event.id });
    if (this.heard.filter((entry) => entry.eventId === event.eventId).length === 1) throw new Error('first time');
  }
}

/** Every event, by name, as it arrived. */
type Heard = { name: string; eventId: string; id: string; status: string; cause?: string };

describe('event ids: the key to deduplicate events on', () => {
  const bed = useTestBed();

  it('every transition of a row yields an event with an id of its own, and a redelivered event keeps its id', async () => {
    let refuse = true;
    let deferOnce = true;
    const server = await bed.startSmtp({
      onRcptTo: (recipient) =>
        recipient === 'gone@example.com' && refuse ? { code: 550, text: '5.1.1 No such user' } : undefined,
      onData: (message) => {
        if (!message.recipients.includes('retry@example.com') || !deferOnce) return undefined;
        deferOnce = false;
        return { code: 451, text: '4.3.0 Try again later' };
      },
    });
    const app = await bed.startApp(testMailOptions(server.url), [FirstTimeThrows]);
    const outbox = app.get(MailOutboxService);
    const admin = app.get(MailOutboxAdmin);
    const heard: Heard[] = [];
    app
      .get(EventEmitter2)
      .on(EMAIL_FAILED_EVENT, (event: EmailFailedEvent) =>
        heard.push({ name: 'failed', eventId: event.eventId, id: event.id, status: event.status, cause: event.cause }),
      );
    app
      .get(EventEmitter2)
      .on(EMAIL_SENT_EVENT, (event: EmailSentEvent) =>
        heard.push({ name: 'sent', eventId: event.eventId, id: event.id, status: 'sent' }),
      );
    const body = { subject: 'Hi', text: 'Hello' };

    const retried = await outbox.enqueue({ to: 'retry@example.com', ...body });
    const refused = await outbox.enqueue({ to: 'gone@example.com', ...body });
    await admin.suppress('blocked@example.com', 'complained');
    const suppressed = await outbox.enqueue({ to: 'blocked@example.com', ...body });
    const cancelled = await outbox.enqueue({ to: 'later@example.com', ...body }, { delayMs: 600_000 });
    await outbox.cancel(cancelled.id);
    const expired = await outbox.enqueue({ to: 'late@example.com', ...body }, { delayMs: 600_000, ttlMs: 660_000 });
    // Its lease ran out with no attempt left: its worker died sending it, every time.
    const crashed = await outbox.enqueue({ to: 'crash@example.com', ...body }, { delayMs: 600_000 });
    await bed.execute(
      `update mail_outbox set status = 'sending', attempts = max_attempts, locked_until = now() - interval '1 second',
                              lock_token = gen_random_uuid() where id = $1`,
      [crashed.id],
    );
    // Due now, and already past its expiry: claimed only to be closed.
    await bed.execute(`update mail_outbox set next_attempt_at = now(), expires_at = now() where id = $1`, [expired.id]);

    const has = (id: string, predicate: (entry: Heard) => boolean) => heard.some((e) => e.id === id && predicate(e));
    await waitFor(
      'an event for every transition',
      () =>
        has(retried.id, (e) => e.cause === 'deferred') &&
        has(retried.id, (e) => e.name === 'sent') &&
        has(refused.id, (e) => e.status === 'failed') &&
        has(suppressed.id, (e) => e.status === 'suppressed') &&
        has(cancelled.id, (e) => e.status === 'cancelled') &&
        has(expired.id, (e) => e.status === 'expired') &&
        has(crashed.id, (e) => e.cause === 'crashes'),
      20_000,
    );

    // Requeued once the address works (its hard bounce had put it on the suppression list): the resend reports
    // with a new id.
    refuse = false;
    expect(await admin.unsuppress('gone@example.com')).toBe(true);
    expect(await admin.requeue({ ids: [refused.id] }, 'address fixed')).toEqual([refused.id]);
    await waitFor('the resend', () => has(refused.id, (e) => e.name === 'sent'));

    // Every emission of a recorded event is either its first, or a redelivery of one heard already.
    const firstTimes = new Map<string, Heard>();
    for (const entry of heard) {
      const first = firstTimes.get(entry.eventId);
      if (first) expect(entry).toEqual(first);
      else firstTimes.set(entry.eventId, entry);
    }
    const transitions = [...firstTimes.values()].map(
      (entry) => `${entry.id}:${entry.name}:${entry.status}:${entry.cause ?? ''}`,
    );
    expect(new Set(transitions).size).toBe(transitions.length);
    expect(transitions).toHaveLength(8);

    // The listener that threw got each sent event again, with the id it had the first time.
    const listener = app.get(FirstTimeThrows);
    await waitFor('the redeliveries', () => listener.heard.length >= 4, 10_000);
    const byEvent = new Map<string, number>();
    for (const { eventId } of listener.heard) byEvent.set(eventId, (byEvent.get(eventId) ?? 0) + 1);
    expect([...byEvent.values()].every((count) => count >= 2)).toBe(true);
  });
});
