import { statementBoundMs } from '../database/statement-bound.js';

/** A settle gives up this long before the row's lease ends, rather than race another worker's claim. */
export const SETTLE_MARGIN_MS = 1_000;

/**
 * The shortest lease in which a send may take its whole deadline and its settle may then wait a statement's whole
 * bound (`statement_timeout` on a slow server, the client's margin more on a silent connection), with the settle's
 * margin. With less, a settle after a full-length send would be cut by the lease before its statement could answer
 * or time out, and the row would be claimed and sent again. Retrying on another connection takes lease beyond that:
 * the default lease (10 min) leaves minutes.
 */
export function leaseForSendAndSettleMs(sendTimeoutMs: number, statementTimeoutMs: number): number {
  return sendTimeoutMs + statementBoundMs(statementTimeoutMs) + SETTLE_MARGIN_MS;
}
