import type { Readable } from 'node:stream';
import { rawBodyOf, type WebhookRequest } from './raw-body.js';

// RFC 8058 §3.2: a mail receiver posts `List-Unsubscribe=One-Click` to the link, as multipart/form-data (which it
// SHOULD) or form-encoded (which it MAY). Only that body unsubscribes: it says a person asked, where a link scanner
// or a prefetch sends a GET, or a POST of nothing.

const FIELD = 'List-Unsubscribe';
const ONE_CLICK = 'One-Click';

/** `form-data; name="List-Unsubscribe"`, the name exactly, whatever other parameters come with it. */
const NAMES_THE_FIELD = new RegExp(
  `^content-disposition:\\s*form-data\\s*;(?:.*;)?\\s*name="${FIELD}"\\s*(?:;|$)`,
  'im',
);

/** The value of the part of a multipart/form-data body named `List-Unsubscribe`, or null. */
function multipartField(body: Buffer, boundary: string): string | null {
  // latin1 keeps every byte as one character: the part boundaries are found whatever the parts hold.
  for (const part of body.toString('latin1').split(`--${boundary}`).slice(1)) {
    const headersEnd = part.indexOf('\r\n\r\n');
    if (headersEnd >= 0 && NAMES_THE_FIELD.test(part.slice(0, headersEnd))) {
      return part.slice(headersEnd + 4).replace(/\r\n$/, '');
    }
  }
  return null;
}

/** The boundary parameter of a multipart content type, quoted or not; null when there is none. */
function boundaryOf(contentType: string): string | null {
  const match = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return match ? (match[1] ?? match[2]) : null;
}

/**
 * Whether a POST's body is RFC 8058's one-click `List-Unsubscribe=One-Click`: read from a form parser's object (the
 * form-encoded body Express and Fastify parse), the bytes a parser kept, or the unread stream (a multipart body, which
 * Nest's parsers leave alone), up to `limit` bytes (`RawBodyError` past it).
 */
export async function isOneClickPost(request: WebhookRequest & Partial<Readable>, limit: number): Promise<boolean> {
  const contentType = String(request.headers['content-type'] ?? '');
  const type = contentType.split(';')[0].trim().toLowerCase();
  const { body } = request;
  if (
    type === 'application/x-www-form-urlencoded' &&
    !Buffer.isBuffer(request.rawBody) &&
    typeof body === 'object' &&
    body !== null &&
    !Buffer.isBuffer(body)
  ) {
    return (body as Record<string, unknown>)[FIELD] === ONE_CLICK;
  }
  // Another parser's object (a JSON body, read and not kept) holds no form field: a 400 says so, where asking for
  // the bytes it did not keep would be a 500.
  const parsedElsewhere = typeof body === 'object' && body !== null && !Buffer.isBuffer(body);
  if (parsedElsewhere && !Buffer.isBuffer(request.rawBody) && type !== 'multipart/form-data') return false;
  // A Buffer is what a content type parser of the app's own made of a multipart body on Fastify, within its limit.
  const raw = Buffer.isBuffer(body) ? body : await rawBodyOf(request, limit);
  if (type === 'multipart/form-data') {
    const boundary = boundaryOf(contentType);
    return boundary !== null && multipartField(raw, boundary) === ONE_CLICK;
  }
  return new URLSearchParams(raw.toString('utf8')).get(FIELD) === ONE_CLICK;
}
