import { randomUUID } from 'node:crypto';
import { addressesIn, ReplyScript, ScriptedHttpServer, whenAnswered } from './scripted-http-server.js';
import type { HttpReply, ReceivedRequest } from './scripted-http-server.js';

/** A message the stand-in took, as Resend would have sent it. */
export interface ResendMessage {
  id: string;
  messageId: string | null;
  idempotencyKey: string | null;
  to: string[];
  /** The addresses of to, cc and bcc, lower case. */
  recipients: string[];
  body: Record<string, unknown>;
}

/** Resend documents `to` as "Max 50" (https://resend.com/docs/api-reference/emails/send-email); cc and bcc have no number. */
export const RESEND_MAX_TO = 50;

const error = (statusCode: number, name: string, message: string): HttpReply => ({
  status: statusCode,
  body: { statusCode, name, message },
});

/** Resend's documented error answers, for scripting. */
export const RESEND_ERRORS = {
  rateLimited: {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { statusCode: 429, name: 'rate_limit_exceeded', message: 'Too many requests' },
  } as HttpReply,
  /** A 429 that asks to wait `seconds` before the next request. */
  rateLimitedFor: (seconds: number): HttpReply => ({
    status: 429,
    headers: { 'retry-after': String(seconds) },
    body: { statusCode: 429, name: 'rate_limit_exceeded', message: 'Too many requests' },
  }),
  serverError: error(500, 'internal_server_error', 'An unexpected error occurred'),
  unavailable: error(503, 'service_unavailable', 'The service is unavailable'),
  validation: error(422, 'validation_error', 'Invalid `to` field'),
  /** The sending domain is not verified, which refuses every mail from it. */
  domainNotVerified: error(403, 'validation_error', 'The example.com domain is not verified'),
  invalidKey: error(403, 'invalid_api_key', 'API key is invalid'),
};

/**
 * A local stand-in for Resend's API (POST /emails, GET /domains): `Authorization: Bearer`, snake_case JSON, `{ id }`
 * on success, `{ statusCode, name, message }` on an error, and its idempotency as documented: a key seen before with
 * the same body answers the first id and stores nothing, with another body 409 `invalid_idempotent_request`, while
 * the first request with the key is unanswered 409 `concurrent_idempotent_requests`. `drop` takes the message
 * first, then drops the connection, `{ afterStoring }` takes it, then answers that; `stall` never answers.
 */
export class ResendTestApi {
  readonly script = new ReplyScript();
  readonly messages: ResendMessage[] = [];
  /** The recipients (to, cc and bcc) of each POST /emails, whatever it was answered. */
  readonly requestedRecipients: string[][] = [];
  private readonly keys = new Map<string, { body: string; id: string | null }>();
  private readonly server = new ScriptedHttpServer((request) => this.handle(request));
  /** The current one-second window of the rate limit, and the requests made in it. */
  private window = { second: 0, requests: 0 };

  /** `requestsPerSecond`: the team's rate limit, answered 429 `rate_limit_exceeded` beyond it; none by default. */
  constructor(private readonly limits: { requestsPerSecond?: number } = {}) {}

  async start(): Promise<this> {
    await this.server.listen();
    return this;
  }

  get url(): string {
    return this.server.url;
  }

  get requests(): ReceivedRequest[] {
    return this.server.requests;
  }

  close(): Promise<void> {
    return this.server.close();
  }

  /** Counts a request in its one-second window: whether it is one too many (Resend's limit is per second). */
  private overRateLimit(): boolean {
    if (this.limits.requestsPerSecond === undefined) return false;
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.window.second) this.window = { second, requests: 0 };
    this.window.requests += 1;
    return this.window.requests > this.limits.requestsPerSecond;
  }

  private handle(request: ReceivedRequest): HttpReply {
    if (request.headers.authorization !== 'Bearer re_test')
      return error(401, 'missing_api_key', 'Missing API key in the authorization header');
    if (request.method === 'GET' && request.path === '/domains') return { status: 200, body: { data: [] } };
    if (request.method !== 'POST' || request.path !== '/emails') return error(404, 'not_found', 'Not found');
    const body = JSON.parse(request.body) as Record<string, unknown>;
    const recipients = [body.to, body.cc, body.bcc].flatMap(addressesIn);
    this.requestedRecipients.push(recipients);
    if (this.overRateLimit()) return RESEND_ERRORS.rateLimited;
    // Resend documents `to` as required; its error for a missing field (the wording is ours).
    if (addressesIn(body.to).length === 0) return error(422, 'missing_required_field', 'Missing `to` field');
    // The documented limit, refused as a validation error (the wording is ours).
    if (addressesIn(body.to).length > RESEND_MAX_TO)
      return error(422, 'validation_error', `Too many recipients in \`to\`: the maximum is ${RESEND_MAX_TO}`);
    const key = (request.headers['idempotency-key'] as string | undefined) ?? null;
    const seen = key === null ? undefined : this.keys.get(key);
    if (seen && seen.body !== request.body)
      return error(409, 'invalid_idempotent_request', 'Same idempotency key used with a different request payload');
    if (seen?.id === null)
      return error(409, 'concurrent_idempotent_requests', 'Same idempotency key used while the first is in progress');
    if (seen) return { status: 200, body: { id: seen.id } };

    const scripted = this.script.take();
    const { instead, afterStoring } = whenAnswered(scripted);
    if (scripted === 'stall' && key !== null) {
      // The first request is in progress until its client gives up.
      this.keys.set(key, { body: request.body, id: null });
      void request.closed.then(() => this.keys.delete(key));
    }
    if (instead) return instead;
    const headers = (body.headers as Record<string, string> | undefined) ?? {};
    const message: ResendMessage = {
      id: randomUUID(),
      messageId: headers['Message-ID'] ?? null,
      idempotencyKey: key,
      to: body.to as string[],
      recipients,
      body,
    };
    this.messages.push(message);
    if (key !== null) this.keys.set(key, { body: request.body, id: message.id });
    return afterStoring ?? { status: 200, body: { id: message.id } };
  }
}
