import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import type { RenderedMail } from './mail-transport.interface.js';
import { builtAtOnce, composeMime, mimeTree } from './outbound-content.js';

const MESSAGE_ID = '<0190a1b2-c3d4@mail.example.com>';

function mail(overrides: Partial<RenderedMail>): RenderedMail {
  return {
    from: { address: 'app@example.com' },
    to: [{ address: 'ann@example.com' }],
    cc: [],
    bcc: [],
    replyTo: [],
    subject: 'Your code',
    headers: {},
    attachments: [],
    ...overrides,
  };
}

const prose = Array.from({ length: 40 }, (_, line) => `line ${line} of the order summary, `.repeat(line % 5)).join(
  '\n',
);
/** Longer than the slices nodemailer's streaming encoder works in, with whitespace on either side of their seams. */
const long = `${'a b\t'.repeat(40_000)} \n${'ünïcödé  '.repeat(9_000)}`;

describe('builtAtOnce', () => {
  it.each([
    { name: 'short ASCII text (7bit)', mail: mail({ text: 'Your code is 123456.\n' }) },
    { name: 'text with long lines (quoted-printable)', mail: mail({ text: prose }) },
    {
      name: 'text with trailing whitespace, CRLF, a lone CR and no final line break',
      mail: mail({ text: 'tab\t\nspace \r\ncr\ronly =equals= \t' }),
    },
    {
      name: 'mostly non-Latin text (base64)',
      mail: mail({ text: 'Ваш код подтверждения: 123456. 确认码。'.repeat(20) }),
    },
    { name: 'text longer than the encoder slices', mail: mail({ text: long }) },
    { name: 'text ending in CR', mail: mail({ text: 'ends in a carriage return\r' }) },
    { name: 'html only', mail: mail({ html: '<p>Hello <b>Ann</b></p>' }) },
    { name: 'html and text (multipart/alternative)', mail: mail({ html: `<p>${prose}</p>`, text: prose }) },
    {
      name: 'non-ASCII subject and names, cc, reply-to and own headers',
      mail: mail({
        from: { name: 'Zoë "Support" Ünal', address: 'support@example.com' },
        to: [{ name: 'Ann Example', address: 'ann@example.com' }, { address: 'bob@bücher.example' }],
        cc: [{ name: 'Çağrı', address: 'cagri@example.com' }],
        replyTo: [{ address: 'help@example.com' }],
        subject: `Ihre Bestellung – Nr. 42 ${'sehr lange Betreffzeile '.repeat(6)}`,
        headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:unsubscribe@example.com>' },
        text: 'Grüße',
      }),
    },
    {
      name: 'attachments in memory, one inline (multipart/mixed and related)',
      mail: mail({
        html: '<img src="cid:logo@example.com">',
        text: 'See the invoice.',
        attachments: [
          { filename: 'invoice.pdf', contentType: 'application/pdf', content: Buffer.alloc(5_000, 7) },
          {
            filename: 'logo.png',
            contentType: 'image/png',
            content: Buffer.from('png bytes'),
            cid: 'logo@example.com',
          },
          { filename: 'notes.txt', contentType: 'text/plain', content: Buffer.from('plain notes\n') },
        ],
      }),
    },
  ])('$name: the bytes the streamed build gives', async ({ mail }) => {
    const node = mimeTree(MESSAGE_ID, mail);
    const atOnce = builtAtOnce(node);
    expect(atOnce).not.toBeNull();
    expect(atOnce!.toString('latin1')).toBe((await node.build()).toString('latin1'));
  });

  it('leaves a mail with an attachment stream to the streamed build', async () => {
    const withStream = mail({
      text: 'See the report.',
      attachments: [
        { filename: 'report.csv', contentType: 'text/csv', content: Readable.from([Buffer.from('a,b\n')]) },
      ],
    });
    expect(builtAtOnce(mimeTree(MESSAGE_ID, withStream))).toBeNull();
    const composed = await composeMime(MESSAGE_ID, withStream, new AbortController().signal);
    expect(composed.toString()).toContain(Buffer.from('a,b\n').toString('base64'));
  });
});
