import type { RelayedEvent } from './relay-destination.interface.js';

/**
 * The body of a relayed event's message, the same for every broker: JSON of the message id, the event's id and name,
 * the mail's id, when it was recorded, and the event as the app's listeners get it.
 */
export function relayMessageBody(event: RelayedEvent): Buffer {
  return Buffer.from(
    JSON.stringify({
      messageId: event.messageId,
      eventId: event.eventId,
      name: event.name,
      mailId: event.mailId,
      recordedAt: event.recordedAt.toISOString(),
      payload: event.payload,
    }),
  );
}
