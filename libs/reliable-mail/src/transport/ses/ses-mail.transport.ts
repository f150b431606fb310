import type { SESv2Client } from '@aws-sdk/client-sesv2';
import { InvalidOptionsError } from '../../errors.js';
import { acceptedOutcome, notSent, outcomeOf } from '../http/provider-outcome.js';
import { loadSdk } from '../../shared/optional-package.js';
import { sendInRequests } from '../http/send-in-requests.js';
import type {
  MailTransport,
  OutboundMessage,
  ProviderSendQuota,
  SendOutcome,
  TransportContext,
} from '../mail-transport.interface.js';
import { addressedTo, composeMime, releaseAttachmentStreams } from '../outbound-content.js';
import { classifySesError, type SesError } from './ses-classification.js';

/** How to reach Amazon SES (API v2). */
export interface SesTransportOptions {
  /** The AWS region of the SES account, such as `eu-west-1`. @default the SDK's (`AWS_REGION`) */
  region?: string;
  /** Another endpoint than the region's (a VPC endpoint, a local emulator). */
  endpoint?: string;
  /** @default the SDK's default credential chain (environment, profile, instance or task role) */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** The configuration set every message is sent with: its event destinations report bounces and complaints. */
  configurationSetName?: string;
}

/**
 * SES takes a message to at most 50 recipients, To, Cc and Bcc together: "Maximum number of recipients per message:
 * 50" (https://docs.aws.amazon.com/ses/latest/dg/quotas.html); SendEmail refuses more, and asks to divide a larger
 * list into groups of 50 or fewer (https://docs.aws.amazon.com/ses/latest/APIReference/API_SendEmail.html).
 */
const SES_MAX_RECIPIENTS = 50;

/** The SDK, loaded at start-up, and its client. */
interface Connected {
  client: SESv2Client;
  sdk: typeof import('@aws-sdk/client-sesv2');
}

const OPTION_KEYS = new Set(['region', 'endpoint', 'credentials', 'configurationSetName']);

function checkOptions(options: SesTransportOptions): void {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('ses', 'must be an object');
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) throw new InvalidOptionsError(`ses.${key}`, 'is not an option of SesMailTransport');
  }
  for (const key of ['region', 'endpoint', 'configurationSetName'] as const) {
    const value = options[key];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0))
      throw new InvalidOptionsError(`ses.${key}`, `must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  const credentials = options.credentials;
  if (
    credentials !== undefined &&
    (typeof credentials?.accessKeyId !== 'string' || typeof credentials.secretAccessKey !== 'string')
  )
    throw new InvalidOptionsError('ses.credentials', 'must be { accessKeyId, secretAccessKey, sessionToken? }');
}

/**
 * Amazon SES through its v2 API (`@aws-sdk/client-sesv2`, an optional peer dependency): `SendEmail` with the raw
 * MIME message, so the stored Message-ID, the headers and the attachments go out as they are, and the envelope of
 * this attempt as its Destination, in requests of at most 50 recipients. The SDK's own retries are off (`maxAttempts: 1`): a retry of a request whose
 * answer was lost would send a second copy, and every retry is the outbox's, recorded as an attempt.
 */
export class SesMailTransport implements MailTransport {
  private client: Promise<Connected> | null = null;
  private defaultSender: string | null = null;

  constructor(private readonly options: SesTransportOptions = {}) {
    checkOptions(options);
  }

  async open(context: TransportContext): Promise<void> {
    this.defaultSender = context.defaultSender;
    await this.connect();
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    const connected = await this.connect();
    let raw: Buffer;
    try {
      raw = await composeMime(message.messageId, message.mail, signal);
    } catch (error) {
      const verdict = notSent((error as Error).message);
      return outcomeOf(message.recipients, verdict, { providerRequestId: null, deduplicatedByKey: false });
    } finally {
      releaseAttachmentStreams(message.mail);
    }
    // The same raw message in each request: its headers name the mail's To and Cc whoever the request goes to.
    return sendInRequests(message, { limit: SES_MAX_RECIPIENTS, toRequired: false }, signal, (recipients) =>
      this.request(connected, message, raw, recipients, signal),
    );
  }

  /** One SendEmail of the raw message, to `recipients` (its Destination). */
  private async request(
    { client, sdk }: Connected,
    message: OutboundMessage,
    raw: Buffer,
    recipients: string[],
    signal: AbortSignal,
  ): Promise<SendOutcome> {
    const { to, cc, bcc } = addressedTo(message.mail, recipients);
    const command = new sdk.SendEmailCommand({
      Content: { Raw: { Data: raw } },
      Destination: {
        ToAddresses: to.map(({ address }) => address),
        CcAddresses: cc.map(({ address }) => address),
        BccAddresses: bcc.map(({ address }) => address),
      },
      ConfigurationSetName: this.options.configurationSetName,
    });
    try {
      const response = await client.send(command, { abortSignal: signal });
      return acceptedOutcome(recipients, {
        reply: `200 MessageId ${response.MessageId ?? '(none)'}`,
        providerMessageId: response.MessageId ?? null,
        providerRequestId: response.$metadata.requestId ?? null,
        acceptedAt: new Date(),
        deduplicatedByKey: false,
      });
    } catch (error) {
      const sender = message.mail.from.address.toLowerCase();
      const verdict = classifySesError(error as SesError, {
        recipients,
        sender,
        fromDefaultSender: sender === this.defaultSender,
      });
      const providerRequestId = (error as SesError).$metadata?.requestId ?? null;
      return outcomeOf(recipients, verdict, { providerRequestId, deduplicatedByKey: false });
    }
  }

  /** Asks SES for the account (`GetAccount`): the credentials and the region answer. */
  async verify(): Promise<void> {
    const { client, sdk } = await this.connect();
    await client.send(new sdk.GetAccountCommand({}), { abortSignal: AbortSignal.timeout(10_000) });
  }

  /**
   * The account's quotas in the client's region (`GetAccount`'s `SendQuota`, which needs `ses:GetAccount`):
   * `MaxSendRate` a second and `Max24HourSend` in a rolling 24 hours, -1 meaning none; `SentLast24Hours`, what the
   * account sent from every sender on it. SES counts each recipient as one message against both.
   */
  async sendQuota(signal: AbortSignal): Promise<ProviderSendQuota | null> {
    const { client, sdk } = await this.connect();
    const { SendQuota: quota } = await client.send(new sdk.GetAccountCommand({}), { abortSignal: signal });
    if (!quota) return null;
    const limit = (value: number | undefined): number | null => (value !== undefined && value > 0 ? value : null);
    return {
      perSecond: limit(quota.MaxSendRate),
      perDay: limit(quota.Max24HourSend),
      ...(quota.SentLast24Hours === undefined ? {} : { sentLast24Hours: quota.SentLast24Hours }),
    };
  }

  async close(): Promise<void> {
    const connected = this.client;
    this.client = null;
    if (connected) (await connected).client.destroy();
  }

  private connect(): Promise<Connected> {
    this.client ??= loadSdk('@aws-sdk/client-sesv2', 'Amazon SES', () => import('@aws-sdk/client-sesv2')).then(
      (sdk) => ({
        sdk,
        client: new sdk.SESv2Client({
          region: this.options.region,
          endpoint: this.options.endpoint,
          credentials: this.options.credentials,
          maxAttempts: 1,
        }),
      }),
    );
    return this.client;
  }
}
