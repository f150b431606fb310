import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

/** What the route reads of a request, whichever HTTP adapter and body parser came first. */
export interface WebhookRequest {
  headers: IncomingHttpHeaders;
  /** The bytes a body parser kept: Nest's `rawBody: true` (`NestFactory.create(AppModule, { rawBody: true })`). */
  rawBody?: Buffer;
  /** The parsed body: a string when a text parser took it whole. */
  body?: unknown;
}

/** Why a request's raw body cannot be had: the route answers with `status`. */
export class RawBodyError extends Error {
  constructor(
    readonly status: 413 | 500,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The request body exactly as it was sent, which Svix and SNS signatures cover: the bytes a body parser kept
 * (`rawBody: true`), a text parser's string, or the unread stream (SNS posts `text/plain`, which Nest's parsers
 * leave alone), read up to `limit` bytes.
 */
export async function rawBodyOf(request: WebhookRequest & Partial<Readable>, limit: number): Promise<Buffer> {
  const tooLarge = () => new RawBodyError(413, `the body exceeds ${limit} bytes`);
  const kept = Buffer.isBuffer(request.rawBody)
    ? request.rawBody
    : typeof request.body === 'string'
      ? Buffer.from(request.body)
      : null;
  if (kept) {
    if (kept.length > limit) throw tooLarge();
    return kept;
  }
  if (typeof request.read !== 'function' || request.readableEnded) {
    throw new RawBodyError(
      500,
      'a body parser read the body without keeping it: create the app with { rawBody: true } to verify webhooks',
    );
  }
  if (Number(request.headers['content-length'] ?? 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of request as Readable) {
    length += (chunk as Buffer).length;
    if (length > limit) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
