import { createHash } from 'node:crypto';
import type { CreateEmailOptions, Resend } from 'resend';
import { InvalidOptionsError } from '../../errors.js';
import { loadSdk } from '../../shared/optional-package.js';
import { acceptedOutcome, attachmentsOrOutcome, outcomeOf, replyOf } from '../http/provider-outcome.js';
import { RequestPacer } from '../http/request-pacer.js';
import { retryAfterMs } from '../http/retry-after.js';
import { type RequestLimits, sendInRequests } from '../http/send-in-requests.js';
import type { MailTransport, OutboundMessage, SendOutcome, TransportContext } from '../mail-transport.interface.js';
import { type AttachmentBytes, formatMailbox, requestAddressing } from '../outbound-content.js';
import { classifyResendError, takenByEarlierRequest } from './resend-classification.js';

/** How to send through Resend. */
export interface ResendTransportOptions {
  /** The API key (`re_…`). */
  apiKey: string;
  /** The API's base URL. @default the SDK's: `RESEND_BASE_URL`, or https://api.resend.com */
  baseUrl?: string;
  /**
   * The requests a second this transport object may make to Resend (every request of every send, a tenth below
   * it): the team's rate limit, less what other processes and transport objects with its keys use. Lanes that share
   * one object share its rate. A mail may take many requests (see the README's Transports), so a lane's
   * `ratePerSecond`, which counts mails, cannot keep to it alone.
   * @default 5 (Resend's default limit for a team)
   */
  requestsPerSecond?: number;
}

/**
 * Resend documents `to` as "Max 50" (https://resend.com/docs/api-reference/emails/send-email) and gives no number
 * for cc and bcc: every request is kept to 50 recipients in all, as SES and Postmark require of To, Cc and Bcc together.
 */
const RESEND_MAX_RECIPIENTS = 50;

/**
 * "The default maximum rate limit is 5 requests per second per team" (https://resend.com/docs/api-reference/rate-limit;
 * it was 2 before), shared by every API key of the team.
 */
const RESEND_DEFAULT_RATE = 5;

/** Resend refuses a longer Idempotency-Key (400 invalid_idempotency_key). */
const MAX_KEY_LENGTH = 256;

function checkOptions(options: ResendTransportOptions): void {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('resend', 'must be an object');
  for (const key of Object.keys(options)) {
    if (key !== 'apiKey' && key !== 'baseUrl' && key !== 'requestsPerSecond')
      throw new InvalidOptionsError(`resend.${key}`, 'is not an option of ResendMailTransport');
  }
  if (typeof options.apiKey !== 'string' || options.apiKey.trim().length === 0)
    throw new InvalidOptionsError('resend.apiKey', 'must be a non-empty string');
  if (options.baseUrl !== undefined && !/^https?:\/\/\S+$/.test(String(options.baseUrl)))
    throw new InvalidOptionsError('resend.baseUrl', `must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
  const rate = options.requestsPerSecond;
  if (rate !== undefined && !(typeof rate === 'number' && Number.isFinite(rate) && rate > 0))
    throw new InvalidOptionsError('resend.requestsPerSecond', `must be a positive number, got ${JSON.stringify(rate)}`);
}

/**
 * The Idempotency-Key of a request: the row's idempotency key (or id) as it is, the same on every attempt. Resend
 * refuses a key reused with another body (409), so a request to fewer than all of the mail's recipients (one was
 * suppressed or took it before, or the mail has more than a request takes) and a key longer than Resend takes get a
 * digest of the key and the request's recipients: the same whenever those recipients are sent to again, and
 * another for any other set (the requests of one attempt go to sets that do not overlap).
 */
export function resendIdempotencyKey(message: OutboundMessage): string {
  const { mail, recipients, idempotencyKey } = message;
  const everyone = new Set([...mail.to, ...mail.cc, ...mail.bcc].map(({ address }) => address.toLowerCase()));
  if (idempotencyKey.length <= MAX_KEY_LENGTH && recipients.length === everyone.size) return idempotencyKey;
  const digest = createHash('sha256')
    .update(`${idempotencyKey}\n${[...recipients].sort().join(',')}`)
    .digest('hex');
  return `reliable-mail:${digest}`;
}

/**
 * Resend through its official SDK (`resend`, an optional peer dependency): `POST /emails` with the stored
 * Message-ID as a header, the envelope of this attempt as to, cc and bcc in requests of at most 50 recipients, and
 * the row's idempotency key (or a digest of it, see `resendIdempotencyKey`) as `Idempotency-Key`. Resend keeps a key for 24 hours and answers a request it has seen with the first one's result,
 * so the retry of a request whose answer was lost does not send a second copy.
 */
export class ResendMailTransport implements MailTransport {
  private client: Promise<Resend> | null = null;
  private defaultSender: string | null = null;

  private readonly limits: RequestLimits;

  constructor(private readonly options: ResendTransportOptions) {
    checkOptions(options);
    this.limits = {
      limit: RESEND_MAX_RECIPIENTS,
      toRequired: true,
      pacer: new RequestPacer(options.requestsPerSecond ?? RESEND_DEFAULT_RATE),
    };
  }

  async open(context: TransportContext): Promise<void> {
    this.defaultSender = context.defaultSender;
    await this.connect();
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    const read = await attachmentsOrOutcome(message, signal);
    if ('outcome' in read) return read.outcome;
    const shared = sharedFields(message, read.attachments);
    return sendInRequests(message, this.limits, signal, (recipients) =>
      this.request({ ...message, recipients }, shared, signal),
    );
  }

  /**
   * One POST /emails to `message.recipients` (one request's): they are its to, cc and bcc, and its Idempotency-Key
   * is theirs (`resendIdempotencyKey`), so each request of a send has its own, the same on every attempt.
   */
  private async request(
    message: OutboundMessage,
    shared: Omit<CreateEmailOptions, 'to' | 'cc' | 'bcc'>,
    signal: AbortSignal,
  ): Promise<SendOutcome> {
    const client = await this.connect();
    const { mail } = message;
    const { to, cc, bcc } = requestAddressing(mail, message.recipients);
    const payload = {
      ...shared,
      to: to.map(formatMailbox),
      cc: cc.map(formatMailbox),
      bcc: bcc.map(formatMailbox),
    } as CreateEmailOptions;
    const { data, error, headers } = await client.emails.send(payload, {
      idempotencyKey: resendIdempotencyKey(message),
      signal,
    });
    // Resend documents no request id: the email's id is what its support and webhooks name.
    const facts = { providerRequestId: null, deduplicatedByKey: true };
    const earlier = { recipients: message.recipients, possiblyTakenBefore: message.possiblyTakenBefore ?? [] };
    if (error && takenByEarlierRequest(error, earlier)) {
      const refusal = replyOf(409, error.name, error.message);
      return acceptedOutcome(message.recipients, {
        ...facts,
        replyCode: 409,
        reply: `${refusal} (taken by an earlier attempt with this key, whose outcome was unknown)`,
        // The 409 does not name the email the first request made.
        providerMessageId: null,
        acceptedAt: new Date(),
      });
    }
    if (error || !data) {
      const fromDefaultSender = mail.from.address.toLowerCase() === this.defaultSender;
      // The SDK gives the answer's headers as an object, lower case: a 429's `retry-after` says when to ask again.
      const retryAfter = retryAfterMs(headers?.['retry-after'], Date.now());
      return outcomeOf(message.recipients, classifyResendError(error ?? {}, { fromDefaultSender }), {
        ...facts,
        retryAfterMs: retryAfter,
      });
    }
    return acceptedOutcome(message.recipients, {
      ...facts,
      reply: `200 id ${data.id}`,
      providerMessageId: data.id,
      acceptedAt: new Date(),
    });
  }

  /** Lists the account's domains: the API answers and knows the key (a sending-only key may not list, and passes). */
  async verify(): Promise<void> {
    const client = await this.connect();
    const { error } = await client.domains.list();
    if (error && error.name !== 'restricted_api_key')
      throw new Error(`Resend refused the request: ${error.name}: ${error.message}`);
  }

  async close(): Promise<void> {}

  private connect() {
    this.client ??= loadSdk('resend', 'Resend', () => import('resend')).then(
      ({ Resend }) => new Resend(this.options.apiKey, { baseUrl: this.options.baseUrl }),
    );
    return this.client;
  }
}

/**
 * What every request of a send carries, built once: a mail sent in 101 requests (1 To and 149 Bcc) encodes its
 * attachments once, not 101 times. Resend takes an attachment's content as base64.
 */
function sharedFields(
  message: OutboundMessage,
  attachments: AttachmentBytes[],
): Omit<CreateEmailOptions, 'to' | 'cc' | 'bcc'> {
  const { mail } = message;
  return {
    from: formatMailbox(mail.from),
    replyTo: mail.replyTo.map(formatMailbox),
    subject: mail.subject,
    text: mail.text,
    html: mail.html,
    headers: { ...mail.headers, 'Message-ID': message.messageId },
    attachments: attachments.map(({ filename, contentType, content, cid }) => ({
      filename,
      contentType,
      content: content.toString('base64'),
      contentId: cid,
    })),
  };
}
