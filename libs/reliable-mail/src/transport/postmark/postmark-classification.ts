import {
  networkFailure,
  type ProviderVerdict,
  replyOf,
  serverErrorStatus,
  verdictsOn,
} from '../http/provider-outcome.js';

// What a Postmark /email error means (the table in the README's "Transports"). The SDK throws one error class per
// HTTP status (`err.name`), with Postmark's `ErrorCode` as `code`; a network failure is a PostmarkError without a
// status, whose cause the transport's own fetch keeps (`networkCode`).

/** The fields of a Postmark SDK error this reads. */
export interface PostmarkErrorFields {
  name?: string;
  message?: string;
  /** Postmark's ErrorCode. */
  code?: number;
  /** The HTTP status; 0 when no answer came. */
  statusCode?: number;
  /** InactiveRecipientsError: the addresses Postmark named as inactive. */
  recipients?: string[];
}

/**
 * Codes that refuse every message of the account or the token: 10 bad token, 405 not allowed to send (no credits,
 * sending disabled), 412 account pending approval, 1235 message stream not found.
 */
const ACCOUNT_CODES = new Set([10, 405, 412, 1235]);
/** 400 sender signature not found, 401 sender signature not confirmed. */
const SENDER_CODES = new Set([400, 401]);
const INACTIVE_RECIPIENT = 406;

export function classifyPostmarkError(
  error: PostmarkErrorFields,
  context: { recipients: string[]; fromDefaultSender: boolean; networkCode?: string | null },
): ProviderVerdict {
  const status = error.statusCode || null;
  const name = error.name ?? 'PostmarkError';
  const message = error.message ?? '';
  if (status === null) return networkFailure(context.networkCode, `${name}: ${message}`);
  const code = error.code ?? 0;
  const verdict = verdictsOn(status, replyOf(status, code ? `${name} (${code})` : name, message));

  if (status === 429) return verdict('deferred', { slowDown: true });
  if (status === 401 || ACCOUNT_CODES.has(code)) return verdict('outage');
  if (SENDER_CODES.has(code)) return verdict(context.fromDefaultSender ? 'outage' : 'refused');
  if (code === INACTIVE_RECIPIENT) {
    const named = new Set((error.recipients ?? []).map((address) => address.toLowerCase()));
    const inactive = context.recipients.filter((address) => named.has(address));
    // "recipients that have all been marked as inactive" names none: every recipient is refused.
    if (inactive.length === 0 || inactive.length === context.recipients.length)
      return verdict('refused', { refusedRecipients: context.recipients });
    // Postmark does not say whether the active recipients were sent to: their outcome is unknown.
    return verdict('unknown', { refusedRecipients: inactive });
  }
  if (status >= 500) return verdict(serverErrorStatus(status));
  return verdict('refused');
}

/**
 * The recipients of a request that Postmark took but will not deliver to: when some of them, not all, are inactive
 * (a hard bounce, a spam complaint, a manual suppression), Postmark answers 200 "Message OK, but will not deliver to
 * these inactive addresses: …" (the pattern postmark.js parses), and 422 with ErrorCode 406 only when every one is.
 * Those it names are refused by name as in the 422; the others took the message.
 */
export function inactiveInAnswer(message: string | undefined, recipients: string[]): string[] {
  const named = /inactive addresses:(.*)$/is.exec(message ?? '')?.[1];
  if (named === undefined) return [];
  const addresses = new Set(named.split(/[\s,;<>"]+/).map((token) => token.replace(/\.$/, '').toLowerCase()));
  return recipients.filter((address) => addresses.has(address));
}
