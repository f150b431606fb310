import {
  type MailTransport,
  PostmarkMailTransport,
  ResendMailTransport,
  SesMailTransport,
} from '@reliable-mail/nestjs';
import { POSTMARK_ERRORS, PostmarkTestApi } from './postmark-test-api.js';
import { RESEND_ERRORS, ResendTestApi } from './resend-test-api.js';
import type { HttpReply, ReceivedRequest, ReplyScript } from './scripted-http-server.js';
import { SES_ERRORS, SesTestFront } from './ses-test-front.js';

export type ProviderName = 'ses' | 'postmark' | 'resend';

/** One provider's local stand-in, as the tests that run against each of them see it. */
export interface ProviderStandIn {
  name: ProviderName;
  /** A transport pointed at the stand-in. */
  transport(): MailTransport;
  script: ReplyScript;
  /**
   * The provider's answers to a throttled request, a 500 (which may follow the message's storing), a 503 (not taken
   * in), a refused message, and a suspended account.
   */
  replies: {
    throttled: HttpReply;
    serverError: HttpReply;
    unavailable: HttpReply;
    refused: HttpReply;
    suspended: HttpReply;
  };
  /** Whether a retry with the same idempotency key is answered without a second copy. */
  deduplicates: boolean;
  /** The Message-IDs of the messages the provider took, in order. */
  delivered(): Promise<Array<string | null>>;
  /** The recipients of each message the provider took, in order, lower case. */
  deliveredTo(): Promise<string[][]>;
  requests: ReceivedRequest[];
  /** The recipients of each send request the stand-in received, whatever it answered. */
  requestedRecipients: string[][];
  close(): Promise<void>;
}

/** An SES transport pointed at the front of the emulator. */
export const sesTransport = (front: SesTestFront) =>
  new SesMailTransport({
    region: 'eu-west-1',
    endpoint: front.endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    configurationSetName: 'transactional',
  });

/** A Postmark transport pointed at the stand-in. */
export const postmarkTransport = (
  api: PostmarkTestApi,
  options: { messageStreamsByLane?: Record<string, string> } = {},
) => new PostmarkMailTransport({ serverToken: 'server-token', requestHost: api.host, useHttps: false, ...options });

export async function startStandIn(name: ProviderName): Promise<ProviderStandIn> {
  if (name === 'ses') {
    const front = await new SesTestFront().start();
    return {
      name,
      transport: () => sesTransport(front),
      script: front.script,
      replies: {
        throttled: SES_ERRORS.throttling,
        serverError: SES_ERRORS.serverError,
        unavailable: SES_ERRORS.unavailable,
        refused: SES_ERRORS.rejected,
        suspended: SES_ERRORS.accountPaused,
      },
      deduplicates: false,
      delivered: async () => (await front.stored()).map((email) => email.messageId),
      deliveredTo: async () =>
        (await front.stored()).map(({ destination: { ToAddresses = [], CcAddresses = [], BccAddresses = [] } }) =>
          [...ToAddresses, ...CcAddresses, ...BccAddresses].map((address) => address.toLowerCase()),
        ),
      requests: front.requests,
      requestedRecipients: front.requestedRecipients,
      close: () => front.close(),
    };
  }
  if (name === 'postmark') {
    const api = await new PostmarkTestApi().start();
    return {
      name,
      transport: () => postmarkTransport(api),
      script: api.script,
      replies: {
        throttled: POSTMARK_ERRORS.rateLimited,
        serverError: POSTMARK_ERRORS.serverError,
        unavailable: POSTMARK_ERRORS.unavailable,
        refused: POSTMARK_ERRORS.invalidRequest,
        suspended: POSTMARK_ERRORS.notAllowedToSend,
      },
      deduplicates: false,
      delivered: async () => api.messages.map((message) => message.messageId),
      deliveredTo: async () => api.messages.map((message) => message.recipients),
      requests: api.requests,
      requestedRecipients: api.requestedRecipients,
      close: () => api.close(),
    };
  }
  // A rate limit as Resend's (5 a second by default), higher to keep the tests short: a mail sent in many requests
  // must space them out.
  const requestsPerSecond = 50;
  const api = await new ResendTestApi({ requestsPerSecond }).start();
  return {
    name,
    transport: () => new ResendMailTransport({ apiKey: 're_test', baseUrl: api.url, requestsPerSecond }),
    script: api.script,
    replies: {
      throttled: RESEND_ERRORS.rateLimited,
      serverError: RESEND_ERRORS.serverError,
      unavailable: RESEND_ERRORS.unavailable,
      refused: RESEND_ERRORS.validation,
      suspended: RESEND_ERRORS.invalidKey,
    },
    deduplicates: true,
    delivered: async () => api.messages.map((message) => message.messageId),
    deliveredTo: async () => api.messages.map((message) => message.recipients),
    requests: api.requests,
    requestedRecipients: api.requestedRecipients,
    close: () => api.close(),
  };
}
