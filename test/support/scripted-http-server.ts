import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A request as the server read it, body and all. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** When the request had been read whole (`Date.now()`). */
  receivedAt: number;
  /** Closes when the client gives up on the request (its connection closed). */
  closed: Promise<void>;
}

/**
 * An answer: a status with a JSON body, or, once the whole request was read, silence until the client gives up
 * (`stall`) or a dropped connection (`drop`).
 */
export type HttpReply = { status: number; body?: unknown; headers?: Record<string, string> } | 'stall' | 'drop';

export type HttpHandler = (request: ReceivedRequest) => HttpReply | Promise<HttpReply>;

/**
 * A real HTTP server on a free loopback port that reads each request whole and answers what its handler says: the
 * provider stand-ins of the tests are handlers of it.
 */
export class ScriptedHttpServer {
  readonly requests: ReceivedRequest[] = [];
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly handler: HttpHandler) {
    this.server = createServer((request, response) => void this.serve(request, response));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Closes the server and every connection, stalled ones too. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const received: ReceivedRequest = {
      method: request.method ?? 'GET',
      path: request.url ?? '/',
      headers: request.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      receivedAt: Date.now(),
      closed: new Promise((resolve) => response.on('close', () => resolve())),
    };
    this.requests.push(received);
    const reply = await this.handler(received);
    if (reply === 'stall') return;
    if (reply === 'drop') {
      request.socket.destroy();
      return;
    }
    response.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    response.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
  }
}

/**
 * A stand-in's scripted answer to a send: given instead of taking the message, or after taking it (`drop`, and
 * `{ afterStoring }`: a provider may store a message and then answer 500, or lose the answer).
 */
export type ScriptedReply = HttpReply | { afterStoring: HttpReply };

/**
 * A scripted reply split by when it is given: `instead` of taking the message, or `afterStoring` it; neither when
 * the stand-in gives its own answer.
 */
export function whenAnswered(reply: ScriptedReply | undefined): { instead?: HttpReply; afterStoring?: HttpReply } {
  if (reply === undefined) return {};
  if (reply === 'drop') return { afterStoring: 'drop' };
  return typeof reply === 'object' && 'afterStoring' in reply
    ? { afterStoring: reply.afterStoring }
    : { instead: reply };
}

/**
 * Replies scripted for the next requests of a stand-in, and one that holds until it is lifted (a suspension). `pass`
 * lets the stand-in give its own answer to that request.
 */
export class ReplyScript {
  private readonly queued: Array<ScriptedReply | 'pass'> = [];
  private held: HttpReply | null = null;

  /** Answers the next requests with these, in order. */
  next(...replies: Array<ScriptedReply | 'pass'>): void {
    this.queued.push(...replies);
  }

  /** Answers every request with this until `lift()`. */
  hold(reply: HttpReply): void {
    this.held = reply;
  }

  lift(): void {
    this.held = null;
  }

  /** The scripted reply for this request, or undefined for the stand-in's own answer. */
  take(): ScriptedReply | undefined {
    const reply = this.held ?? this.queued.shift();
    return reply === 'pass' ? undefined : reply;
  }
}

/** The addresses in a provider's To, Cc or Bcc field (a comma-separated string or an array), lower case. */
export function addressesIn(field: unknown): string[] {
  const fields = Array.isArray(field) ? field : [field];
  return fields.flatMap((value) =>
    typeof value === 'string' ? (value.match(/[^\s,<>"]+@[^\s,<>"]+/g) ?? []).map((a) => a.toLowerCase()) : [],
  );
}
