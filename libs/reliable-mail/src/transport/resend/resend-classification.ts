import {
  networkFailure,
  type ProviderVerdict,
  replyOf,
  serverErrorStatus,
  verdictsOn,
} from '../http/provider-outcome.js';

// What a Resend /emails error means (the table in the README's "Transports"). The SDK never throws: it resolves
// `{ error: { name, statusCode, message } }`, and every network failure (a drop, a stall cut by the send deadline,
// nothing listening) is the same `application_error` without a status. Resend deduplicates by Idempotency-Key, so
// such an unknown outcome is retried safely.

/** The error a Resend SDK call resolves with. */
export interface ResendErrorFields {
  name?: string;
  message?: string;
  statusCode?: number | null;
}

/** Names that refuse every message of the account or the key. */
const ACCOUNT_REFUSALS = new Set([
  'missing_api_key',
  'invalid_api_key',
  'restricted_api_key',
  'daily_quota_exceeded',
  'monthly_quota_exceeded',
]);

export function classifyResendError(
  error: ResendErrorFields,
  context: { fromDefaultSender: boolean },
): ProviderVerdict {
  const name = error.name ?? 'error';
  const message = error.message ?? '';
  const status = error.statusCode ?? null;
  if (status === null) return networkFailure(null, `${name}: ${message}`);
  const verdict = verdictsOn(status, replyOf(status, name, message));

  if (ACCOUNT_REFUSALS.has(name) || status === 401) return verdict('outage');
  if (status === 429) return verdict('deferred', { slowDown: true });
  // 403 validation_error: the sending domain is not verified (or a test key sends to a foreign address).
  if (status === 403) return verdict(context.fromDefaultSender ? 'outage' : 'refused');
  // An earlier request with this key is still being processed: ask again later, it is the same message.
  if (name === 'concurrent_idempotent_requests') return verdict('deferred');
  if (status >= 500) return verdict(serverErrorStatus(status));
  // 422 validation_error and missing_required_field, 400, and 409 invalid_idempotent_request that is not this row's
  // own earlier request (see `takenByEarlierRequest`): another sender of the team used the key.
  return verdict('refused');
}

/**
 * Whether Resend's answer says that this row's own earlier request took the message: 409 invalid_idempotent_request
 * (the key was used in the last 24 hours with another body) to recipients an earlier attempt may have reached
 * (`OutboundMessage.possiblyTakenBefore`: its request went, and no answer or a 5xx other than 503 came). The key is the row's and the request's
 * recipients' (`resendIdempotencyKey`), so that request had these recipients; its body differed because the retry
 * rendered again (a template or resolver that is not deterministic). Resend kept and sent the first: the message is
 * taken, and deduplicated by key. On a first attempt the same answer can only mean another sender of the team used the
 * key: refused.
 */
export function takenByEarlierRequest(
  error: ResendErrorFields,
  request: { recipients: string[]; possiblyTakenBefore: string[] },
): boolean {
  if (error.statusCode !== 409 || error.name !== 'invalid_idempotent_request') return false;
  const earlier = new Set(request.possiblyTakenBefore);
  return request.recipients.length > 0 && request.recipients.every((address) => earlier.has(address));
}
