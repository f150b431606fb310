import { randomUUID } from 'node:crypto';
import { addressesIn, ReplyScript, ScriptedHttpServer, whenAnswered } from './scripted-http-server.js';
import type { HttpReply, ReceivedRequest } from './scripted-http-server.js';

/** A message the stand-in took, as Postmark would have sent it. */
export interface PostmarkMessage {
  id: string;
  messageId: string | null;
  stream: string;
  to: string | undefined;
  cc: string | undefined;
  bcc: string | undefined;
  /** The addresses of To, Cc and Bcc that Postmark delivers to (not the inactive ones), lower case. */
  recipients: string[];
  subject: string;
  body: Record<string, unknown>;
}

const error = (status: number, code: number, message: string): HttpReply => ({
  status,
  body: { ErrorCode: code, Message: message },
});

/** Postmark takes at most 50 recipients in To, Cc and Bcc together (https://postmarkapp.com/developer). */
export const POSTMARK_MAX_RECIPIENTS = 50;

/** Postmark's documented error answers, for scripting. */
export const POSTMARK_ERRORS = {
  rateLimited: { status: 429, body: { ErrorCode: 0, Message: 'Rate limit exceeded' } } as HttpReply,
  /** A 429 with a Retry-After (Postmark documents none): for a test that one is read when it comes. */
  rateLimitedFor: (seconds: number): HttpReply => ({
    status: 429,
    headers: { 'retry-after': String(seconds) },
    body: { ErrorCode: 0, Message: 'Rate limit exceeded' },
  }),
  serverError: { status: 500, body: { ErrorCode: 0, Message: 'Internal server error' } } as HttpReply,
  /** Maintenance: the SDK's ServiceUnavailablerError (sic). */
  unavailable: error(503, 100, 'Maintenance: the API is offline for a short while'),
  invalidRequest: error(422, 300, 'Invalid email request: the To field holds an invalid address'),
  inactiveRecipients: (addresses: string[]) =>
    error(
      422,
      406,
      `You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: ${addresses.join(', ')}. Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression.`,
    ),
  /** The account may not send: out of credits, or suspended. */
  notAllowedToSend: error(422, 405, 'Not allowed to send: your account is suspended'),
};

/**
 * A local stand-in for Postmark's API (POST /email, GET /server), as its documentation and the SDK describe it:
 * `X-Postmark-Server-Token`, `{ To, SubmittedAt, MessageID, ErrorCode: 0, Message: 'OK' }` on success and
 * `{ ErrorCode, Message }` on an error. `script` sets the next answers; `drop` takes the message first, then drops
 * the connection (a lost answer), `{ afterStoring }` takes it, then answers that; `stall` never answers. Addresses
 * in `inactive` are Postmark's inactive recipients: a request to some of them is taken for the others and answered
 * 200 "Message OK, but will not deliver to these inactive addresses: …"; one to nobody else is refused, 422 with
 * ErrorCode 406.
 */
export class PostmarkTestApi {
  readonly script = new ReplyScript();
  readonly messages: PostmarkMessage[] = [];
  /** The recipients (To, Cc and Bcc) of each POST /email, whatever it was answered. */
  readonly requestedRecipients: string[][] = [];
  /** Inactive recipients (a hard bounce, a spam complaint, a manual suppression), lower case. */
  readonly inactive = new Set<string>();
  private readonly server = new ScriptedHttpServer((request) => this.handle(request));

  async start(): Promise<this> {
    await this.server.listen();
    return this;
  }

  /** `host:port`, for the transport's `requestHost`. */
  get host(): string {
    return `127.0.0.1:${this.server.port}`;
  }

  get requests(): ReceivedRequest[] {
    return this.server.requests;
  }

  close(): Promise<void> {
    return this.server.close();
  }

  private handle(request: ReceivedRequest): HttpReply {
    if (request.headers['x-postmark-server-token'] !== 'server-token')
      return error(401, 10, 'Bad or missing Server API Token');
    if (request.method === 'GET' && request.path === '/server') return { status: 200, body: { ID: 1, Name: 'test' } };
    if (request.method !== 'POST' || request.path !== '/email') return error(404, 0, 'Not found');
    const body = JSON.parse(request.body) as Record<string, unknown>;
    const recipients = [body.To, body.Cc, body.Bcc].flatMap(addressesIn);
    this.requestedRecipients.push(recipients);
    // Postmark documents To as required: a request without one is an invalid request (the wording is ours).
    if (addressesIn(body.To).length === 0) return error(422, 300, "Invalid email request: the 'To' field is required");
    // Postmark refuses a message to more recipients as an invalid request (ErrorCode 300); the wording is ours.
    if (recipients.length > POSTMARK_MAX_RECIPIENTS)
      return error(422, 300, `Invalid email request: ${recipients.length} recipients, the maximum is 50`);
    const { instead, afterStoring } = whenAnswered(this.script.take());
    if (instead) return instead;
    const inactive = recipients.filter((address) => this.inactive.has(address));
    if (inactive.length === recipients.length && inactive.length > 0)
      return POSTMARK_ERRORS.inactiveRecipients(inactive);
    const headers = (body.Headers as Array<{ Name: string; Value: string }> | undefined) ?? [];
    const message: PostmarkMessage = {
      id: randomUUID(),
      messageId: headers.find((header) => header.Name.toLowerCase() === 'message-id')?.Value ?? null,
      stream: (body.MessageStream as string | undefined) ?? 'outbound',
      to: body.To as string | undefined,
      cc: body.Cc as string | undefined,
      bcc: body.Bcc as string | undefined,
      recipients: recipients.filter((address) => !this.inactive.has(address)),
      subject: body.Subject as string,
      body,
    };
    this.messages.push(message);
    if (afterStoring !== undefined) return afterStoring;
    return {
      status: 200,
      body: {
        To: message.to,
        SubmittedAt: new Date().toISOString(),
        MessageID: message.id,
        ErrorCode: 0,
        // The wording Postmark answers (ActiveCampaign/postmark.js#87), which postmark.js parses.
        Message:
          inactive.length === 0
            ? 'OK'
            : `Message OK, but will not deliver to these inactive addresses: ${inactive.join(', ')}`,
      },
    };
  }
}
