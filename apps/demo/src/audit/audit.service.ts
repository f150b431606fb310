import { Injectable, Logger } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { EMAIL_FAILED_EVENT, EMAIL_SENT_EVENT, EmailFailedEvent, EmailSentEvent } from '@reliable-mail/nestjs';

export type AuditEntry =
  | { type: 'sent'; name: typeof EMAIL_SENT_EVENT; receivedAt: string; event: EmailSentEvent }
  | { type: 'failed'; name: typeof EMAIL_FAILED_EVENT; receivedAt: string; event: EmailFailedEvent };

export const AUDIT_CAPACITY = 100;

/**
 * Keeps the last 100 mail events in memory. reliable-mail emits each event at least once, so a redelivered event
 * (same row id, and for failures the same attempt) is recognised and not recorded twice.
 */
@Injectable()
export class AuditService {
  private readonly logger = new Logger('Audit');
  private readonly entries: AuditEntry[] = [];
  private readonly keys: string[] = [];

  @OnEvent(EMAIL_SENT_EVENT)
  onSent(event: EmailSentEvent): void {
    if (!this.remember(`sent:${event.id}`)) return;
    this.push({ type: 'sent', name: EMAIL_SENT_EVENT, receivedAt: new Date().toISOString(), event });
    this.logger.log(`sent ${event.messageId} (attempt ${event.attempt}) to ${event.accepted.join(', ')}`);
  }

  @OnEvent(EMAIL_FAILED_EVENT)
  onFailed(event: EmailFailedEvent): void {
    if (!this.remember(`failed:${event.id}:${event.attempt}`)) return;
    this.push({ type: 'failed', name: EMAIL_FAILED_EVENT, receivedAt: new Date().toISOString(), event });
    const next = event.nextAttemptAt
      ? `retry at ${event.nextAttemptAt.toISOString()}`
      : event.deadLettered
        ? 'dead-lettered'
        : 'failed for good';
    this.logger.warn(`failed ${event.messageId} (attempt ${event.attempt}): ${event.reason}; ${next}`);
  }

  /** Oldest first. */
  list(): AuditEntry[] {
    return [...this.entries];
  }

  private remember(key: string): boolean {
    if (this.keys.includes(key)) return false;
    this.keys.push(key);
    if (this.keys.length > AUDIT_CAPACITY) this.keys.shift();
    return true;
  }

  private push(entry: AuditEntry): void {
    this.entries.push(entry);
    if (this.entries.length > AUDIT_CAPACITY) this.entries.shift();
  }
}
