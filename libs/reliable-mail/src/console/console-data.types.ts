import type { OutboxRowWithAttempts, OutboxStatus } from '../outbox/mail.types.js';
import type { RowCount } from '../outbox/operations.types.js';
import type { SearchFilter } from '../outbox/sql/filter.js';

/** One instance as its heartbeat row shows it: which lanes it runs and what state each is in. */
export interface InstanceState {
  id: string;
  host: string;
  pid: number;
  startedAt: Date;
  heartbeatAt: Date;
  /** Past its heartbeat interval by a margin: the process is gone or cut off. */
  stale: boolean;
  lanes: Record<string, InstanceLaneState>;
}

export interface InstanceLaneState {
  state: 'running' | 'paused' | 'outage';
  /** Why the lane is paused or out (`outage`, `slow-down`, `connection-failure`), null when running. */
  reason: string | null;
  /** When a paused or out lane tries again. */
  until: string | null;
  inFlight: number;
}

/** Mails settled in one minute: what the overview's throughput chart draws. */
export interface MinuteFigures {
  minute: Date;
  sent: number;
  failed: number;
  /** Attempts that ended in a retry (transient, partial, unknown) in that minute. */
  deferred: number;
  /** From creation to sent, of the mails sent that minute; null when none was. */
  latencyP50Ms: number | null;
  latencyP95Ms: number | null;
}

/** Rows of one status in one lane; `estimated` when the figure is the statistics' (sent rows, when many). */
export interface ConsoleRowCount extends RowCount {
  estimated: boolean;
}

export interface ConsoleOverview {
  counts: ConsoleRowCount[];
  /** Pending rows due now and rows being sent. */
  backlog: number;
  oldestDueAt: Date | null;
  lagMs: number;
  deadLetters: number;
  suppressions: number;
  instances: InstanceState[];
  /** One entry per minute of the last `hours`, oldest first, minutes without any mail included as zeros. */
  minutes: MinuteFigures[];
}

/** The console's search: the admin filter, and a Message-ID and a provider's message id. */
export type ConsoleFilter = SearchFilter;

export interface MailListItem {
  id: string;
  status: OutboxStatus;
  lane: string;
  /** The mail's subject; empty when a template renders it at send time. */
  subject: string;
  /** The template's name when the mail is rendered from one, else null. */
  template: string | null;
  to: string[];
  attempts: number;
  createdAt: Date;
  lastError: string | null;
  metadata: Record<string, unknown> | null;
}

export interface MailPage {
  items: MailListItem[];
  /** The id to pass as `before` for the next page; null on the last one. */
  next: string | null;
}

/** An operator's action as the audit table keeps it. */
export interface AuditEntry {
  id: string;
  actor: string;
  action: string;
  reason: string | null;
  filter: Record<string, unknown> | null;
  /** How many mails it changed: a bulk action's ids are not read back whole for a timeline or a list. */
  rows: number;
  /** The first of them, which the audit page links to; null for an action on no mail (the suppression list). */
  firstOutboxId: string | null;
  createdAt: Date;
}

/** An event recorded for a row and not yet confirmed by the listeners (confirmed ones are deleted). */
export interface PendingEvent {
  id: string;
  name: string;
  createdAt: Date;
  lockedUntil: Date;
}

export interface MailTimeline {
  row: OutboxRowWithAttempts;
  events: PendingEvent[];
  audit: AuditEntry[];
  traceparent: string | null;
}
