import { randomUUID } from 'node:crypto';
import type { FeedbackInput } from '../../libs/reliable-mail/src/feedback/sql/record-feedback.js';

/** A hard bounce of ann@example.com reported by Postmark, as a parser hands it to `recordFeedback`; unauthenticated. */
export function feedbackInput(overrides: Partial<FeedbackInput> = {}): FeedbackInput {
  return {
    id: randomUUID(),
    source: 'postmark',
    recipient: 'ann@example.com',
    kind: 'bounced',
    bounce_type: 'hard',
    provider_event_id: 'event-1',
    provider_message_id: null,
    row_id: null,
    message_id: null,
    status: null,
    diagnostic: null,
    reported_at: new Date().toISOString(),
    payload: {},
    suppression_reason: null,
    authenticated: false,
    event_name: null,
    event_for_listeners: true,
    event_payload: null,
    ...overrides,
  };
}
