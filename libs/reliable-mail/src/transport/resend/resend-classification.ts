import { networkFailure, type ProviderVerdict, replyOf, verdictsOn } from '../http/provider-outcome.js';

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
  if (status >= 500) return verdict('deferred');
  // 422 validation_error and missing_required_field, 400, and 409 invalid_idempotent_request (an earlier attempt
  // with this key had another body: Resend keeps the first for 24 hours and will not send this one).
  return verdict('refused');
}
