import { InvalidOptionsError } from '../../errors.js';
import type { PostmarkWebhookOptions } from '../sources/postmark-webhook-source.js';
import type { ResendWebhookOptions } from '../sources/resend-webhook-source.js';
import type { SesWebhookOptions } from '../sources/ses-webhook-source.js';

/** The providers whose webhooks `ReliableMailWebhooksModule` takes, each at `POST <path>/<name>`. */
export interface WebhookSourcesOptions {
  /** Amazon SES through an SNS topic: `POST <path>/ses`. */
  ses?: SesWebhookOptions;
  /** Resend: `POST <path>/resend`. */
  resend?: ResendWebhookOptions;
  /** Postmark: `POST <path>/postmark`. */
  postmark?: PostmarkWebhookOptions;
}

/** The options of `ReliableMailWebhooksModule.forRoot()` besides `path`. */
export interface ReliableMailWebhooksOptions {
  /**
   * The providers whose webhooks are taken. None for a module that serves only the one-click unsubscribe route
   * (ReliableMailModule's `unsubscribe`); DSN emails need none: the app hands them to `MailFeedbackService.ingestDsn`.
   * @default none
   */
  sources?: WebhookSourcesOptions;
  /**
   * The largest request body read, in bytes; a larger one is refused with 413. A body parser in front of the route
   * applies its own limit first (Nest's JSON parser: 100 KiB unless the app sets another).
   * @default 1048576 (1 MiB)
   */
  maxBodyBytes?: number;
}

export interface ResolvedWebhooksOptions {
  sources: WebhookSourcesOptions;
  maxBodyBytes: number;
}

const MODULE = 'ReliableMailWebhooksModule';
const SOURCE_NAMES = ['ses', 'resend', 'postmark'];
const TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/i;

function invalid(option: string, reason: string): InvalidOptionsError {
  return new InvalidOptionsError(option, reason, MODULE);
}

function requireText(option: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0) throw invalid(option, 'must be a non-empty string');
}

/** Checks the options at start-up, naming the one it refuses. */
export function resolveWebhooksOptions(options: ReliableMailWebhooksOptions): ResolvedWebhooksOptions {
  const { sources: given = {}, maxBodyBytes = 1_048_576 } = options ?? {};
  if (!given || typeof given !== 'object' || Array.isArray(given)) {
    throw invalid('sources', `must be an object of sources (${SOURCE_NAMES.join(', ')}), got ${JSON.stringify(given)}`);
  }
  // A factory may leave a source it has no secret for as undefined: that source is simply not configured.
  const sources: WebhookSourcesOptions = Object.fromEntries(
    Object.entries(given).filter(([, source]) => source !== undefined),
  );
  for (const name of Object.keys(sources)) {
    if (!SOURCE_NAMES.includes(name)) {
      throw invalid(`sources.${name}`, `is not a webhook source (${SOURCE_NAMES.join(', ')}; DSNs go to ingestDsn)`);
    }
  }
  if (sources.ses) {
    const { topicArns } = sources.ses;
    if (!Array.isArray(topicArns) || topicArns.length === 0 || !topicArns.every((arn) => TOPIC_ARN.test(arn))) {
      throw invalid('sources.ses.topicArns', 'must list the SNS topic ARNs allowed to post (arn:aws:sns:…)');
    }
  }
  if (sources.resend) {
    const secrets = [sources.resend.secret].flat();
    if (secrets.length === 0) throw invalid('sources.resend.secret', 'must be the webhook signing secret (whsec_…)');
    secrets.forEach((secret) => requireText('sources.resend.secret', secret));
  }
  if (sources.postmark) {
    const { basicAuth, header } = sources.postmark;
    if (!basicAuth && !header) throw invalid('sources.postmark', 'needs basicAuth or header: Postmark signs nothing');
    if (basicAuth) {
      requireText('sources.postmark.basicAuth.username', basicAuth.username);
      requireText('sources.postmark.basicAuth.password', basicAuth.password);
    }
    if (header) {
      if (typeof header.name !== 'string' || !HEADER_NAME.test(header.name)) {
        throw invalid('sources.postmark.header.name', 'must be an HTTP header name');
      }
      requireText('sources.postmark.header.value', header.value);
    }
  }
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw invalid('maxBodyBytes', `must be an integer >= 1, got ${JSON.stringify(maxBodyBytes)}`);
  }
  return { sources, maxBodyBytes };
}
