import {
  networkFailure,
  type ProviderVerdict,
  replyOf,
  serverErrorStatus,
  verdictsOn,
} from '../http/provider-outcome.js';

// What an Amazon SES v2 SendEmail error means (the table in the README's "Transports"). Classified by the error's
// name and HTTP status, not by `instanceof`: several errors have no class of their own in the v2 SDK and arrive as
// the generic SESv2ServiceException. Network failures carry only a `code`.

/** The fields of an AWS SDK error this reads. */
export interface SesError {
  name?: string;
  message?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number; requestId?: string };
}

/** Throttling: the account's per-second rate. The lane pauses; the message is retried. */
const THROTTLING = new Set(['ThrottlingException', 'TooManyRequestsException', 'Throttling']);
/**
 * The account or its credentials refuse every message: sending paused or suspended, the daily quota spent, a
 * configuration set that does not exist, credentials that are missing or refused.
 */
const ACCOUNT_REFUSALS = new Set([
  'AccountSendingPausedException',
  'SendingPausedException',
  'AccountSuspendedException',
  'LimitExceededException',
  'NotFoundException',
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'InvalidSignatureException',
  'SignatureDoesNotMatch',
  'ExpiredTokenException',
  'CredentialsProviderError',
]);
/** Errors of the request's sender: an outage when it is the module's own `from`, a refusal of this mail otherwise. */
const SENDER_REFUSALS = new Set(['MailFromDomainNotVerifiedException']);

// From the start of a token only (the lookbehind): tried from every character of a long one, quadratic time.
const EMAIL_PATTERN = /(?<![^\s,:;<>()])[^\s,:;<>()]+@[^\s,:;<>()]+[^\s,:;<>().]/g;

/** `MessageRejected: Email address is not verified. The following identities failed the check …: a@x, b@y`. */
function addressesIn(message: string): string[] {
  return (message.match(EMAIL_PATTERN) ?? []).map((address) => address.toLowerCase());
}

export function classifySesError(
  error: SesError,
  context: { recipients: string[]; sender: string; fromDefaultSender: boolean },
): ProviderVerdict {
  const name = error.name ?? 'Error';
  const message = error.message ?? '';
  const status = error.$metadata?.httpStatusCode ?? null;
  const verdict = verdictsOn(status, status === null ? `${name}: ${message}` : replyOf(status, name, message));

  if (THROTTLING.has(name) || status === 429) return verdict('deferred', { slowDown: true });
  if (ACCOUNT_REFUSALS.has(name) || status === 401 || status === 403) return verdict('outage');
  if (SENDER_REFUSALS.has(name)) return verdict(context.fromDefaultSender ? 'outage' : 'refused');
  if (name === 'MessageRejected') {
    // Unverified identities (the sandbox) are named: the sender's is everyone's problem, a recipient's its own.
    const named = addressesIn(message);
    if (named.includes(context.sender)) return verdict(context.fromDefaultSender ? 'outage' : 'refused');
    const refused = context.recipients.filter((address) => named.includes(address));
    // SES refused the whole request: recipients it did not name were not sent to, and go again on their own.
    return refused.length > 0 ? verdict('deferred', { refusedRecipients: refused }) : verdict('refused');
  }
  if (status !== null && status >= 500) return verdict(serverErrorStatus(status));
  if (status !== null && status >= 400) return verdict('refused');
  // No answer: a reset, a timeout or the send deadline (AbortError) once connected may follow the provider's accept.
  return networkFailure(error.code, `${name}: ${message}`);
}
