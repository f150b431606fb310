import { type Agent, get } from 'node:https';
import { FeedbackPayloadError, FeedbackSignatureError, FeedbackUnavailableError } from '../../errors.js';
import { ignoredReport, objectAt, parseJson, stringAt } from '../feedback-report.js';
import { loadSdk } from '../../shared/optional-package.js';
import { sesFeedbackOf } from './ses-notification.js';
import { type CertificateCache, SnsCertificateUnavailableError, SnsCertificates } from './sns-certificates.js';
import type { WebhookSource } from './webhook-source.js';

/** Amazon SES feedback through an SNS topic with an HTTPS subscription to this endpoint. */
export interface SesWebhookOptions {
  /**
   * The SNS topics that may post here. Required: any AWS account can create a topic, have AWS sign its messages and
   * subscribe this URL, so a valid signature alone does not say the message is about this app's mail.
   */
  topicArns: string[];
  /**
   * The HTTPS agent through which the signing certificate is fetched and subscriptions are confirmed (a proxy's,
   * or a test's own). Certificates are cached per URL.
   * @default Node's global agent
   */
  agent?: Agent;
}

/** Where SNS's signing certificates and subscription confirmations are: AWS's SNS hosts only. */
const SNS_HOST = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;
/** The region of an SNS host, and of a topic's ARN (`arn:aws:sns:us-east-1:…`, `arn:aws-cn:sns:cn-north-1:…`). */
const HOST_REGION = /^sns\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;
const TOPIC_REGION = /^arn:aws[a-z-]*:sns:([a-z0-9-]+):/;
/** sns-payload-validator's pattern for a signing certificate's URL, checked here before anything is fetched. */
const CERTIFICATE_URL =
  /^https:\/\/sns\.[a-zA-Z0-9-]{3,}\.amazonaws\.com(\.cn)?\/SimpleNotificationService-[a-zA-Z0-9]{32}\.pem$/;
/** What sns-payload-validator rejects a message for; the certificate itself is fetched here. */
const REFUSALS = new Set(['Invalid Signature', 'Invalid SignatureVersion', 'Invalid SigningCertURL', 'Invalid Type']);
/** A certificate fetch or a subscription confirmation that takes longer fails the request (SNS retries it). */
const AWS_REQUEST_TIMEOUT_MS = 10_000;

interface Validator {
  validate(payload: object): Promise<unknown>;
}

/**
 * Verifies SNS messages with sns-payload-validator (signature versions 1 and 2, the certificate URL pinned to AWS's
 * SNS hosts before anything is fetched), confirms subscriptions to an allowed topic, and reads SES notifications.
 * The validator checks signatures only: it fetches no certificate itself, since it would keep whatever the URL
 * answered; `SnsCertificates` fetches and checks each one, and puts it in the validator's cache, where `validate`
 * looks first.
 */
export async function sesWebhookSource(options: SesWebhookOptions): Promise<WebhookSource> {
  const { default: SnsPayloadValidator } = await loadSdk(
    'sns-payload-validator',
    'The ses webhook source',
    () => import('sns-payload-validator'),
  );
  const validator = new SnsPayloadValidator({ requestAgent: options.agent });
  const certificates = new SnsCertificates(cacheOf(validator), options.agent, AWS_REQUEST_TIMEOUT_MS);
  const topics = new Set(options.topicArns);
  return {
    name: 'ses',
    async receive(body) {
      const message = objectAt(parseJson(body.toString('utf8')), 'the SNS message');
      const topic = stringAt(message.TopicArn, 'TopicArn');
      if (!topics.has(topic))
        throw new FeedbackSignatureError(`the SNS topic ${topic} is not one of sources.ses.topicArns`);
      await verify(validator, certificates, message, topic);
      switch (message.Type) {
        case 'SubscriptionConfirmation':
          await confirmSubscription(stringAt(message.SubscribeURL, 'SubscribeURL'), options.agent);
          return ignoredReport(`subscribed to ${topic}`);
        case 'UnsubscribeConfirmation':
          return ignoredReport(`unsubscribed from ${topic}`);
        default:
          return sesFeedbackOf(
            parseJson(stringAt(message.Message, 'Message')),
            stringAt(message.MessageId, 'MessageId'),
          );
      }
    },
  };
}

/**
 * sns-payload-validator 2.x keeps its certificates in `certCache` (an LRU of `maxCerts`, 1,000) and reads it before
 * fetching. It is not part of its typed interface: a version that moved it stops the start here rather than
 * fetching unchecked certificates.
 */
function cacheOf(validator: object): CertificateCache {
  const cache = (validator as { certCache?: Partial<CertificateCache> }).certCache;
  if (typeof cache?.get !== 'function' || typeof cache.set !== 'function') {
    throw new Error(
      'sns-payload-validator keeps no certCache (get, set): this version is not one the ses source reads',
    );
  }
  return cache as CertificateCache;
}

async function verify(
  validator: Validator,
  certificates: SnsCertificates,
  message: Record<string, unknown>,
  topic: string,
): Promise<void> {
  // The validator's own first checks, made before the certificate is fetched: a message it refuses fetches nothing.
  if (message.SignatureVersion !== '1' && message.SignatureVersion !== '2') {
    throw new FeedbackSignatureError('SNS: Invalid SignatureVersion');
  }
  const url = message.SigningCertURL;
  if (typeof url !== 'string' || !CERTIFICATE_URL.test(url))
    throw new FeedbackSignatureError('SNS: Invalid SigningCertURL');
  // SNS signs a topic's messages with its own region's certificate: a URL of another region is no message of that
  // topic, and is fetched for nobody.
  const certificateRegion = HOST_REGION.exec(new URL(url).hostname.toLowerCase())?.[1];
  const topicRegion = TOPIC_REGION.exec(topic)?.[1];
  if (certificateRegion === undefined || certificateRegion !== topicRegion) {
    throw new FeedbackSignatureError(`SNS: the SigningCertURL is not of the topic's region (${topicRegion ?? 'none'})`);
  }
  try {
    await certificates.load(url);
  } catch (error) {
    // Not the sender's fault: the request fails (503), nothing is kept, and SNS's retry fetches again.
    if (error instanceof SnsCertificateUnavailableError) {
      throw new FeedbackUnavailableError(`the SNS signature could not be checked: ${error.message}`);
    }
    throw error;
  }
  try {
    // The certificate is in the validator's cache now, where this call finds it before fetching anything.
    await validator.validate(message);
  } catch (error) {
    const reason = (error as Error).message;
    if (REFUSALS.has(reason)) throw new FeedbackSignatureError(`SNS: ${reason}`);
    throw new Error(`the SNS signature could not be checked: ${reason}`, { cause: error });
  }
}

/** Confirms an HTTPS subscription by visiting its SubscribeURL, which must be on AWS's SNS hosts. */
async function confirmSubscription(subscribeUrl: string, agent: Agent | undefined): Promise<void> {
  const url = new URL(subscribeUrl);
  if (url.protocol !== 'https:' || !SNS_HOST.test(url.hostname)) {
    throw new FeedbackPayloadError(`SubscribeURL must be an https URL on an SNS host, got ${url.origin}`);
  }
  const status = await new Promise<number>((resolve, reject) => {
    const request = get(url, { agent }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
    request.setTimeout(AWS_REQUEST_TIMEOUT_MS, () =>
      request.destroy(new Error('confirming the subscription timed out')),
    );
  });
  if (status < 200 || status >= 300) throw new Error(`SNS answered the subscription confirmation with ${status}`);
}
