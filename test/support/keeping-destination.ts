import type { RelayDestination, RelayedEvent } from '@reliable-mail/nestjs';

/**
 * A destination of the app's own (the `RelayDestination` interface is public, as `MailTransport` is): it keeps what
 * it was given, and refuses the events of the mails it is told to, as a broker refuses a message it cannot take.
 */
export class KeepingDestination implements RelayDestination {
  readonly published: RelayedEvent[] = [];
  readonly refused = new Set<string>();
  opened = false;
  closed = false;

  constructor(readonly name = 'keeping') {}

  async open(): Promise<void> {
    this.opened = true;
  }

  async publish(event: RelayedEvent): Promise<void> {
    // With a NUL, which PostgreSQL stores in no text: the error is kept without it, and defers the rest of its batch.
    if (this.refused.has(event.mailId)) throw new Error('message too large\0');
    this.published.push(event);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
