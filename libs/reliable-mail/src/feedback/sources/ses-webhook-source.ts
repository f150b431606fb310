import { type Agent, get } from 'node:https';
import { FeedbackPayloadError, FeedbackSignatureError } from '../../errors.js';
import { ignoredReport, objectAt, parseJson, stringAt } from '../feedback-report.js';
import { loadSdk } from '../../transport/http/load-sdk.js';
import { sesFeedbackOf } from './ses-notification.js';
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
/** What sns-payload-validator rejects a message for (anything else is a failure to fetch the certificate). */
const REFUSALS = new Set(['Invalid Signature', 'Invalid SignatureVersion', 'Invalid SigningCertURL', 'Invalid Type']);
/** A certificate fetch or a subscription confirmation that takes longer fails the request (SNS retries it). */
const AWS_REQUEST_TIMEOUT_MS = 10_000;

/**
 * Verifies SNS messages with sns-payload-validator (signature versions 1 and 2, the certificate URL pinned to AWS's
 * SNS hosts before anything is fetched), confirms subscriptions to an allowed topic, and reads SES notifications.
 */
export async function sesWebhookSource(options: SesWebhookOptions): Promise<WebhookSource> {
  const { default: Validator } = await loadSdk(
    'sns-payload-validator',
    'The ses webhook source',
    () => import('sns-payload-validator'),
  );
  const validator = new Validator({ requestAgent: options.agent });
  const topics = new Set(options.topicArns);
  return {
    name: 'ses',
    async receive(body) {
      const message = objectAt(parseJson(body.toString('utf8')), 'the SNS message');
      const topic = stringAt(message.TopicArn, 'TopicArn');
      if (!topics.has(topic))
        throw new FeedbackSignatureError(`the SNS topic ${topic} is not one of sources.ses.topicArns`);
      await verify(validator, message);
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

async function verify(
  validator: { validate(payload: object): Promise<unknown> },
  message: Record<string, unknown>,
): Promise<void> {
  try {
    // sns-payload-validator fetches without a timeout of its own.
    await withTimeout(validator.validate(message), 'fetching the SNS signing certificate');
  } catch (error) {
    const reason = (error as Error).message;
    if (REFUSALS.has(reason)) throw new FeedbackSignatureError(`SNS: ${reason}`);
    // The certificate could not be fetched: not the sender's fault, so the request fails and SNS retries it.
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

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} took more than ${AWS_REQUEST_TIMEOUT_MS} ms`)),
      AWS_REQUEST_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
