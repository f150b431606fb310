import type { Message, ServerClient } from 'postmark';
import { InvalidOptionsError } from '../../errors.js';
import { loadSdk } from '../../shared/optional-package.js';
import { acceptedOutcome, attachmentsOrOutcome, outcomeOf, replyOf } from '../http/provider-outcome.js';
import { RequestPacer } from '../http/request-pacer.js';
import { retryAfterMs } from '../http/retry-after.js';
import { type RequestLimits, sendInRequests } from '../http/send-in-requests.js';
import type {
  MailAddress,
  MailTransport,
  OutboundMessage,
  SendOutcome,
  TransportContext,
} from '../mail-transport.interface.js';
import { type AttachmentBytes, formatMailbox, requestAddressing } from '../outbound-content.js';
import { classifyPostmarkError, inactiveInAnswer, type PostmarkErrorFields } from './postmark-classification.js';

/** How to send through Postmark. */
export interface PostmarkTransportOptions {
  /** The server's API token (`X-Postmark-Server-Token`). */
  serverToken: string;
  /**
   * The message stream of every lane not named in `messageStreamsByLane`: Postmark keeps transactional and
   * broadcast mail apart, and asks that each goes through a stream of its kind.
   * @default 'outbound' (the server's transactional stream)
   */
  messageStream?: string;
  /** Message streams by lane, such as `{ bulk: 'broadcast' }`. */
  messageStreamsByLane?: Record<string, string>;
  /** The API's host (and port). @default 'api.postmarkapp.com' */
  requestHost?: string;
  /** `false` speaks plain HTTP, to a local stand-in. @default true */
  useHttps?: boolean;
}

/**
 * Postmark takes a message to at most 50 recipients: "The maximum number of recipients for each email is 50,
 * including all To, CC, and BCC recipients" (https://postmarkapp.com/developer).
 */
const POSTMARK_MAX_RECIPIENTS = 50;

const OPTION_KEYS = new Set(['serverToken', 'messageStream', 'messageStreamsByLane', 'requestHost', 'useHttps']);

function checkOptions(options: PostmarkTransportOptions): void {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('postmark', 'must be an object');
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key))
      throw new InvalidOptionsError(`postmark.${key}`, 'is not an option of PostmarkMailTransport');
  }
  for (const key of ['serverToken', 'messageStream', 'requestHost'] as const) {
    const value = options[key];
    if ((value !== undefined || key === 'serverToken') && (typeof value !== 'string' || value.trim().length === 0))
      throw new InvalidOptionsError(`postmark.${key}`, `must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  for (const [lane, stream] of Object.entries(options.messageStreamsByLane ?? {})) {
    if (typeof stream !== 'string' || stream.length === 0)
      throw new InvalidOptionsError(`postmark.messageStreamsByLane.${lane}`, 'must be a message stream id');
  }
  if (options.useHttps !== undefined && typeof options.useHttps !== 'boolean')
    throw new InvalidOptionsError('postmark.useHttps', 'must be a boolean');
}

/** What the fetch of one request saw that the SDK's error drops: the network error's code, the answer's Retry-After. */
interface RequestRecord {
  networkCode: string | null;
  retryAfter: string | null;
}

/**
 * Postmark through its official SDK (`postmark`, an optional peer dependency): `POST /email` with the stored
 * Message-ID as a header, each lane's message stream, and the envelope of this attempt as To, Cc and Bcc, in
 * requests of at most 50 recipients. Postmark takes no idempotency key: a request whose answer was lost is
 * `unknown`, and its retry may be a second copy (with the same Message-ID). The SDK does not retry by itself.
 */
export class PostmarkMailTransport implements MailTransport {
  private sdk: Promise<typeof import('postmark')> | null = null;
  private defaultSender: string | null = null;
  /** No rate of its own: it holds every request of this object back for as long as a Retry-After asks. */
  private readonly limits: RequestLimits = {
    limit: POSTMARK_MAX_RECIPIENTS,
    toRequired: true,
    pacer: new RequestPacer(null),
  };

  constructor(private readonly options: PostmarkTransportOptions) {
    checkOptions(options);
  }

  async open(context: TransportContext): Promise<void> {
    this.defaultSender = context.defaultSender;
    await this.load();
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    const read = await attachmentsOrOutcome(message, signal);
    if ('outcome' in read) return read.outcome;
    const shared = this.sharedFields(message, read.attachments);
    return sendInRequests(message, this.limits, signal, (recipients) =>
      this.request(message, shared, recipients, signal),
    );
  }

  /** One POST /email to `recipients`: they are its To, Cc and Bcc, so they are who the headers name. */
  private async request(
    message: OutboundMessage,
    shared: Omit<Message, 'To' | 'Cc' | 'Bcc'>,
    recipients: string[],
    signal: AbortSignal,
  ): Promise<SendOutcome> {
    const record: RequestRecord = { networkCode: null, retryAfter: null };
    const client = await this.client(signal, record);
    const { mail } = message;
    const { to, cc, bcc } = requestAddressing(mail, recipients);
    try {
      const response = await client.sendEmail({ ...shared, To: list(to), Cc: list(cc), Bcc: list(bcc) });
      const submittedAt = new Date(response.SubmittedAt);
      const inactive = inactiveInAnswer(response.Message, recipients);
      return acceptedOutcome(
        recipients,
        {
          reply: `200 ${response.Message}: ${response.MessageID}`,
          providerMessageId: response.MessageID,
          providerRequestId: null,
          acceptedAt: Number.isNaN(submittedAt.getTime()) ? new Date() : submittedAt,
          deduplicatedByKey: false,
        },
        { recipients: inactive, reply: replyOf(200, 'inactive recipient', response.Message) },
      );
    } catch (error) {
      const verdict = classifyPostmarkError(error as PostmarkErrorFields, {
        recipients,
        fromDefaultSender: mail.from.address.toLowerCase() === this.defaultSender,
        networkCode: record.networkCode,
      });
      return outcomeOf(recipients, verdict, {
        providerRequestId: null,
        deduplicatedByKey: false,
        retryAfterMs: retryAfterMs(record.retryAfter, Date.now()),
      });
    }
  }

  /**
   * What every request of a send carries, built once: a mail sent in 101 requests (1 To and 149 Bcc) encodes its
   * attachments once, not 101 times.
   */
  private sharedFields(message: OutboundMessage, attachments: AttachmentBytes[]): Omit<Message, 'To' | 'Cc' | 'Bcc'> {
    const { mail } = message;
    return {
      From: formatMailbox(mail.from),
      ReplyTo: list(mail.replyTo),
      Subject: mail.subject,
      TextBody: mail.text,
      HtmlBody: mail.html,
      Headers: [
        { Name: 'Message-ID', Value: message.messageId },
        ...Object.entries(mail.headers).map(([Name, Value]) => ({ Name, Value })),
      ],
      Attachments: attachments.map(({ filename, contentType, content, cid }) => ({
        Name: filename,
        ContentType: contentType,
        Content: content.toString('base64'),
        ContentID: cid ? `cid:${cid}` : null,
      })),
      MessageStream: this.options.messageStreamsByLane?.[message.lane] ?? this.options.messageStream ?? 'outbound',
    };
  }

  /** Asks Postmark for the server the token belongs to. */
  async verify(): Promise<void> {
    const client = await this.client(AbortSignal.timeout(10_000), { networkCode: null, retryAfter: null });
    await client.getServer();
  }

  async close(): Promise<void> {}

  private load() {
    this.sdk ??= loadSdk('postmark', 'Postmark', () => import('postmark'));
    return this.sdk;
  }

  /**
   * A client for one request (a plain object over fetch, cheap to make): its fetch ends the request when the send's
   * deadline passes, and keeps the network error's code and the answer's Retry-After, which the SDK's error drops.
   */
  private async client(signal: AbortSignal, record: RequestRecord): Promise<ServerClient> {
    const sdk = await this.load();
    return new sdk.ServerClient(this.options.serverToken, {
      useHttps: this.options.useHttps ?? true,
      requestHost: this.options.requestHost ?? 'api.postmarkapp.com',
      fetch: async (input: string | URL | Request, init?: RequestInit) => {
        try {
          const response = await fetch(input, {
            ...init,
            signal: AbortSignal.any([signal, ...optional(init?.signal)]),
          });
          record.retryAfter = response.headers.get('retry-after');
          return response;
        } catch (error) {
          record.networkCode = networkCodeOf(error);
          throw error;
        }
      },
    });
  }
}

/** Addresses as one header value, or none for an empty list. */
function list(addresses: MailAddress[]): string | undefined {
  return addresses.length > 0 ? addresses.map(formatMailbox).join(', ') : undefined;
}

function optional<T>(value: T | null | undefined): T[] {
  return value === null || value === undefined ? [] : [value];
}

/** fetch's TypeError hides the socket's error code in its cause. */
function networkCodeOf(error: unknown): string | null {
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code ?? (error as { code?: string }).code ?? null;
}
