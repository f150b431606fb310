/**
 * The client gives up on a statement of reliable-mail's own connections this long after the server should have
 * cancelled it (`statement_timeout`): the server's own error normally comes first, and only a server that no longer
 * answers at all (a failover that left the old connection half-open, a partition) lets the client's bound fire.
 */
export const CLIENT_TIMEOUT_MARGIN_MS = 5_000;

/** The longest a statement of reliable-mail's own connections can keep its caller waiting. */
export function statementBoundMs(statementTimeoutMs: number): number {
  return statementTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS;
}
