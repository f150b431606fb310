/** One recorded event as a relay destination publishes it. */
export interface RelayedEvent {
  /**
   * `<mail id>:<event id>`: the same at every publication of this event, to every destination. JetStream
   * deduplicates on it (`Nats-Msg-Id`) within its stream's duplicate window; a RabbitMQ consumer must, since the
   * broker does not (see docs/events.md "Relay to a broker").
   */
  readonly messageId: string;
  /** The event's id: `eventId` of the event the app's listeners get. */
  readonly eventId: string;
  /** The mail's id (its outbox row). */
  readonly mailId: string;
  /** The event's name, as the app's listeners get it: `reliable-mail.email.sent` and the others. */
  readonly name: string;
  readonly recordedAt: Date;
  /** The event as JSON: what `EmailSentEvent` and the others are made from (`fromJSON`). */
  readonly payload: Record<string, unknown>;
}

/**
 * A broker (or anything else) that recorded events are published to at least once, apart from the app's listeners:
 * `NatsJetStreamDestination`, `RabbitMqDestination`, or an object of the app's own.
 */
export interface RelayDestination {
  /**
   * The destination's name in the relay table, health, metrics and logs: what its backlog is kept under, so a new
   * name is a new destination (the old one's backlog stays until `reliable-mail relay remove <name>`). Letters,
   * digits, `.`, `_` and `-`.
   */
  readonly name: string;
  /** The names of the events it takes. @default every event of reliable-mail's */
  readonly events?: readonly string[];
  /**
   * At start: loads the client's packages, so that a missing one stops the start. A broker that cannot be reached is
   * no reason to: it is connected to when the first event is published, and its events wait in the table meanwhile.
   */
  open(): Promise<void>;
  /**
   * Publishes one event and resolves once the broker has taken charge of it (JetStream's ack, RabbitMQ's publisher
   * confirm); rejects otherwise, and the event is published again later. Called for several events at once; `signal`
   * is aborted when the relay gives up on this publication (its timeout, shutdown).
   */
  publish(event: RelayedEvent, signal: AbortSignal): Promise<void>;
  /** At shutdown, after the last publication was confirmed or given up on. */
  close(): Promise<void>;
}
