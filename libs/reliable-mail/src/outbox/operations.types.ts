import type { OutboxStatus } from './mail.types.js';

// What operators, health checks and metrics read from the outbox (see sql/ for the statements).

/** Which rows an operator means. Every field narrows the set. */
export interface OutboxFilter {
  ids?: string[];
  status?: OutboxStatus | OutboxStatus[];
  lane?: string;
  /** An address in to, cc or bcc (case-insensitive). */
  recipient?: string;
  idempotencyKey?: string;
  /** Rows whose metadata contains this JSON (`@>`). */
  metadata?: Record<string, unknown>;
  createdAfter?: Date;
  createdBefore?: Date;
}

export interface HealthFigures {
  /** Rows waiting to be sent: due now, being sent, or waiting for a retry (not those scheduled for later). */
  backlog: number;
  /** How long the longest-waiting of them has waited since it was due, in milliseconds (0 when none waits). */
  lagMs: number;
  deadLetters: number;
}

/** Delivery feedback in a window, for health and metrics. */
export interface FeedbackFigures {
  /** Mails sent in the window. */
  sent: number;
  hardBounces: number;
  softBounces: number;
  complaints: number;
  /** Bounces and complaints that named no known row. */
  unlinked: number;
}

export interface RowCount {
  status: OutboxStatus;
  lane: string;
  count: number;
}

export interface OutboxStats extends HealthFigures {
  counts: RowCount[];
  sent: { lastMinute: number; lastHour: number };
  failed: { lastMinute: number; lastHour: number };
}

/** A recipient's one-click unsubscribe from a category of non-transactional mail. */
export interface Unsubscribe {
  address: string;
  category: string;
  /** The mail whose link was used; null where it was not recorded. */
  outboxId: string | null;
  createdAt: Date;
}

export interface Suppression {
  address: string;
  reason: string;
  /** Why: a hard bounce (an SMTP reply or delivery feedback), a complaint, or an operator's entry. */
  source: 'bounce' | 'complaint' | 'operator';
  outboxId: string | null;
  createdAt: Date;
}
