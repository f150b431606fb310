import type { FeedbackReport } from '../feedback-report.js';

/** Request headers, names in lower case (Node's `IncomingHttpHeaders` is one). */
export type WebhookHeaders = Record<string, string | string[] | undefined>;

/**
 * A provider whose webhooks post feedback: it verifies a request by the provider's documented mechanism, throwing
 * `FeedbackSignatureError` when it does not verify, and reads its feedback, throwing `FeedbackPayloadError` when
 * the verified body cannot be read. Nothing is stored before both passed.
 */
export interface WebhookSource {
  readonly name: 'ses' | 'resend' | 'postmark';
  receive(body: Buffer, headers: WebhookHeaders): Promise<FeedbackReport>;
}

/** A header's single value; a repeated header is not what any provider sends. */
export function headerOf(headers: WebhookHeaders, name: string): string | null {
  const value = headers[name];
  return typeof value === 'string' ? value : null;
}
