import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sesLocal from 'aws-ses-v2-local';
import {
  type HttpReply,
  type ReceivedRequest,
  ReplyScript,
  ScriptedHttpServer,
  whenAnswered,
} from './scripted-http-server.js';

/** An email in aws-ses-v2-local's store, joined with what the front read of its raw MIME. */
export interface SesStoredEmail {
  /** The emulator's id (`ses-N`), which SendEmail answered. */
  sesId: string;
  /** The Message-ID header of the raw message the SDK sent. */
  messageId: string | null;
  subject: string;
  destination: { ToAddresses?: string[]; CcAddresses?: string[]; BccAddresses?: string[] };
  configurationSetName: string | null;
}

/** An SES error as the v2 REST-JSON protocol carries it: the name in `x-amzn-ErrorType`, the text in the body. */
export const sesError = (status: number, name: string, message: string): HttpReply => ({
  status,
  headers: {
    'x-amzn-errortype': `${name}:http://internal.amazon.com/coral/com.amazonaws.sesv2/`,
    'x-amzn-requestid': randomUUID(),
  },
  body: { message },
});

/**
 * SES takes at most 50 recipients in a message's To, Cc and Bcc together
 * (https://docs.aws.amazon.com/ses/latest/dg/quotas.html); aws-ses-v2-local does not check it, the front does.
 */
export const SES_MAX_RECIPIENTS = 50;

export const SES_ERRORS = {
  throttling: sesError(429, 'ThrottlingException', 'Maximum sending rate exceeded.'),
  serverError: sesError(500, 'InternalFailure', 'The request processing has failed because of an unknown error.'),
  unavailable: sesError(503, 'ServiceUnavailable', 'Service is unavailable. Try again later.'),
  rejected: sesError(400, 'MessageRejected', 'Transaction failed: Illegal address'),
  accountPaused: sesError(400, 'AccountSendingPausedException', 'Sending is paused for this account.'),
};

// A CommonJS module: its exports object is the default import, and the server function its `default`.
const startEmulator = sesLocal.default;

/**
 * aws-ses-v2-local (a local SES v2 emulator) behind a front of the tests' own. The emulator stores parsed fields
 * only, under ids of its own, and has no fault switch; the front passes each request on, reads the Message-ID of
 * the raw MIME the SDK sent and the id the emulator answered, adds the request id SES gives
 * (`x-amzn-RequestId`), and answers what `script` says instead (`drop` and `{ afterStoring }`: once the emulator
 * has answered the request).
 */
export class SesTestFront {
  readonly script = new ReplyScript();
  /** The recipients (the Destination's To, Cc and Bcc) of each SendEmail, whatever it was answered. */
  readonly requestedRecipients: string[][] = [];
  private readonly sent = new Map<string, Omit<SesStoredEmail, 'subject'>>();
  private readonly front = new ScriptedHttpServer((request) => this.handle(request));
  private emulator: Server | null = null;

  async start(): Promise<this> {
    this.emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
    // The emulator keeps its store in its module, for every server of the process: start each test empty.
    await fetch(`${this.emulatorUrl}/clear-store`, { method: 'POST' });
    await this.front.listen();
    return this;
  }

  /** The endpoint to give the SDK. */
  get endpoint(): string {
    return this.front.url;
  }

  get requests(): ReceivedRequest[] {
    return this.front.requests;
  }

  /** What the emulator stored, in order, with each message's Message-ID. */
  async stored(): Promise<SesStoredEmail[]> {
    const response = await fetch(`${this.emulatorUrl}/store`);
    const { emails } = (await response.json()) as { emails: Array<{ messageId: string; subject: string }> };
    return emails.map((email) => ({
      ...this.sent.get(email.messageId)!,
      sesId: email.messageId,
      subject: email.subject,
    }));
  }

  async close(): Promise<void> {
    await this.front.close();
    this.emulator?.closeAllConnections();
    await new Promise<void>((resolve) => (this.emulator ? this.emulator.close(() => resolve()) : resolve()));
  }

  private get emulatorUrl(): string {
    return `http://127.0.0.1:${(this.emulator!.address() as AddressInfo).port}`;
  }

  private async handle(request: ReceivedRequest): Promise<HttpReply> {
    const sending = request.method === 'POST' && request.path === '/v2/email/outbound-emails';
    if (sending) {
      const {
        ToAddresses = [],
        CcAddresses = [],
        BccAddresses = [],
      } = (JSON.parse(request.body) as { Destination?: SesStoredEmail['destination'] }).Destination ?? {};
      const recipients = [...ToAddresses, ...CcAddresses, ...BccAddresses].map((address) => address.toLowerCase());
      this.requestedRecipients.push(recipients);
      // SES's text for it (SendEmail of v1: InvalidParameterValue; SMTP: 554); v2 names it a bad request.
      if (recipients.length > SES_MAX_RECIPIENTS)
        return sesError(400, 'BadRequestException', 'Recipient count exceeds 50.');
    }
    const { instead, afterStoring } = whenAnswered(sending ? this.script.take() : undefined);
    if (instead) return instead;
    const response = await fetch(`${this.emulatorUrl}${request.path}`, {
      method: request.method,
      headers: { authorization: String(request.headers.authorization ?? ''), 'content-type': 'application/json' },
      body: request.method === 'GET' ? undefined : request.body,
    });
    const text = await response.text();
    const body: unknown = text ? JSON.parse(text) : undefined;
    if (sending && response.ok) this.record(request.body, (body as { MessageId: string }).MessageId);
    if (afterStoring !== undefined) return afterStoring;
    return { status: response.status, body, headers: { 'x-amzn-requestid': randomUUID() } };
  }

  private record(requestBody: string, sesId: string): void {
    const input = JSON.parse(requestBody) as {
      Content: { Raw: { Data: string } };
      Destination?: SesStoredEmail['destination'];
      ConfigurationSetName?: string;
    };
    const raw = Buffer.from(input.Content.Raw.Data, 'base64').toString('utf8');
    this.sent.set(sesId, {
      sesId,
      messageId: /^Message-ID:\s*(\S+)/im.exec(raw)?.[1] ?? null,
      destination: input.Destination ?? {},
      configurationSetName: input.ConfigurationSetName ?? null,
    });
  }
}
