import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { isOneClickPost } from './one-click-body.js';
import { RawBodyError, type WebhookRequest } from './raw-body.js';

const FORM = 'application/x-www-form-urlencoded';
const BOUNDARY = '----reliable-mail-test';

/** A multipart/form-data body, as RFC 7578 writes it, of the fields given. */
function multipart(fields: Record<string, string>, boundary = BOUNDARY): string {
  const parts = Object.entries(fields).map(
    ([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
  );
  return `${parts.join('')}--${boundary}--\r\n`;
}

/** A request whose body no parser read: the unread stream, as Express leaves a multipart body. */
function unread(contentType: string, body: string): WebhookRequest & Readable {
  return Object.assign(Readable.from([Buffer.from(body)]), { headers: { 'content-type': contentType } });
}

describe('isOneClickPost: whether a POST is RFC 8058’s List-Unsubscribe=One-Click', () => {
  it.each<{ name: string; request: () => WebhookRequest; oneClick: boolean }>([
    {
      name: "a form-encoded body Express's parser read",
      request: () => ({ headers: { 'content-type': FORM }, body: { 'List-Unsubscribe': 'One-Click' } }),
      oneClick: true,
    },
    {
      name: 'a form-encoded body kept raw (rawBody: true)',
      request: () => ({
        headers: { 'content-type': `${FORM}; charset=utf-8` },
        body: { 'List-Unsubscribe': 'One-Click' },
        rawBody: Buffer.from('List-Unsubscribe=One-Click'),
      }),
      oneClick: true,
    },
    {
      name: 'a multipart body, unread',
      request: () =>
        unread(`multipart/form-data; boundary=${BOUNDARY}`, multipart({ 'List-Unsubscribe': 'One-Click' })),
      oneClick: true,
    },
    {
      name: 'a multipart body with a quoted boundary and another field first',
      request: () =>
        unread(
          `multipart/form-data; boundary="${BOUNDARY}"`,
          multipart({ other: 'x', 'List-Unsubscribe': 'One-Click' }),
        ),
      oneClick: true,
    },
    {
      name: 'a multipart body a Fastify parser of the app’s own made a Buffer of',
      request: () => ({
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body: Buffer.from(multipart({ 'List-Unsubscribe': 'One-Click' })),
      }),
      oneClick: true,
    },
    {
      name: 'another value',
      request: () => ({ headers: { 'content-type': FORM }, body: { 'List-Unsubscribe': 'Yes' } }),
      oneClick: false,
    },
    { name: 'an empty form', request: () => ({ headers: { 'content-type': FORM }, body: {} }), oneClick: false },
    { name: 'no body at all', request: () => unread(FORM, ''), oneClick: false },
    {
      name: 'the field in another case',
      request: () => unread(FORM, 'list-unsubscribe=One-Click'),
      oneClick: false,
    },
    {
      name: 'a multipart body without the field',
      request: () => unread(`multipart/form-data; boundary=${BOUNDARY}`, multipart({ unsubscribe: 'One-Click' })),
      oneClick: false,
    },
    {
      name: 'a multipart body whose field is named List-Unsubscribe-Post',
      request: () =>
        unread(`multipart/form-data; boundary=${BOUNDARY}`, multipart({ 'List-Unsubscribe-Post': 'One-Click' })),
      oneClick: false,
    },
    {
      name: "a JSON body Express's parser read and did not keep",
      request: () => ({ headers: { 'content-type': 'application/json' }, body: { 'List-Unsubscribe': 'One-Click' } }),
      oneClick: false,
    },
    {
      name: 'a multipart body without a boundary in its type',
      request: () => unread('multipart/form-data', multipart({ 'List-Unsubscribe': 'One-Click' })),
      oneClick: false,
    },
  ])('$name: $oneClick', async ({ request, oneClick }) => {
    expect(await isOneClickPost(request(), 1_024)).toBe(oneClick);
  });

  it('a body past the limit is refused with 413, unread beyond it', async () => {
    await expect(
      isOneClickPost(unread(FORM, `List-Unsubscribe=One-Click&pad=${'x'.repeat(2_000)}`), 1_024),
    ).rejects.toEqual(new RawBodyError(413, 'the body exceeds 1024 bytes'));
  });
});
