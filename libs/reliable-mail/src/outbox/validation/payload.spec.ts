import { describe, expect, it } from '@jest/globals';
import { MailValidationError } from '../../errors.js';
import { MailTemplateRegistry } from '../../templates/mail-template.registry.js';
import type { MailTemplate } from '../../templates/mail-template.js';
import type { ContentMail, MailPayloadV2, OutgoingMail } from '../mail.types.js';
import { recipientsOf } from '../recipients.js';
import { hashableContent } from './content-hash.js';
import type { MailContentRules } from './content-rules.js';
import { toMailPayload } from './payload.js';

const defaultFrom = 'Shop <noreply@example.com>';
const base: ContentMail = { to: 'a@example.com', subject: 'Hi', text: 'Hello' };
const basePayload: MailPayloadV2 = {
  v: 2,
  from: { name: 'Shop', address: 'noreply@example.com' },
  to: [{ address: 'a@example.com' }],
  cc: [],
  bcc: [],
  replyTo: [],
  subject: 'Hi',
  text: 'Hello',
  headers: {},
};

function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected a MailValidationError, nothing was thrown');
}

describe('toMailPayload', () => {
  it.each<{ name: string; mail: Partial<ContentMail>; expected: Partial<MailPayloadV2> }>([
    { name: 'plain address, default from', mail: {}, expected: {} },
    {
      name: 'named address',
      mail: { to: 'Ann <a@example.com>' },
      expected: { to: [{ name: 'Ann', address: 'a@example.com' }] },
    },
    {
      name: 'quoted display name',
      mail: { to: '"Ann Lee" <a@example.com>' },
      expected: { to: [{ name: 'Ann Lee', address: 'a@example.com' }] },
    },
    {
      name: 'surrounding whitespace',
      mail: { to: '  a@example.com  ' },
      expected: { to: [{ address: 'a@example.com' }] },
    },
    {
      name: 'object address is trimmed',
      mail: { to: { name: ' Bob ', address: ' b@example.com ' } },
      expected: { to: [{ name: 'Bob', address: 'b@example.com' }] },
    },
    {
      name: 'object with a blank name drops it',
      mail: { to: { name: '  ', address: 'b@example.com' } },
      expected: { to: [{ address: 'b@example.com' }] },
    },
    {
      name: 'mixed array',
      mail: { to: ['Ann <a@example.com>', { address: 'b@example.com' }, 'c@example.co.uk'] },
      expected: {
        to: [{ name: 'Ann', address: 'a@example.com' }, { address: 'b@example.com' }, { address: 'c@example.co.uk' }],
      },
    },
    {
      name: 'explicit from overrides the default',
      mail: { from: 'billing@example.com' },
      expected: { from: { address: 'billing@example.com' } },
    },
    {
      name: 'replyTo is normalised',
      mail: { replyTo: 'Help <help@example.com>' },
      expected: { replyTo: [{ name: 'Help', address: 'help@example.com' }] },
    },
    {
      name: 'cc-only recipient',
      mail: { to: undefined, cc: 'c@example.com' },
      expected: { to: [], cc: [{ address: 'c@example.com' }] },
    },
    {
      name: 'bcc-only recipient',
      mail: { to: undefined, bcc: ['d@example.com'] },
      expected: { to: [], bcc: [{ address: 'd@example.com' }] },
    },
    {
      name: 'html only',
      mail: { text: undefined, html: '<p>Hello</p>' },
      expected: { text: undefined, html: '<p>Hello</p>' },
    },
    { name: 'text and html', mail: { html: '<p>Hello</p>' }, expected: { html: '<p>Hello</p>' } },
    {
      name: 'extra headers are kept',
      mail: { headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@example.com>' } },
      expected: { headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@example.com>' } },
    },
  ])('$name', ({ mail, expected }) => {
    const payload = toMailPayload({ ...base, ...mail }, defaultFrom);
    const wanted: MailPayloadV2 = { ...basePayload, ...expected };
    if (wanted.text === undefined) delete wanted.text;
    expect(payload).toStrictEqual(wanted);
  });

  it.each<{ name: string; mail: Record<string, unknown>; field: string }>([
    { name: 'invalid to address', mail: { to: 'not-an-address' }, field: 'to' },
    { name: 'address without a dotted domain', mail: { to: 'a@localhost' }, field: 'to' },
    { name: 'invalid address in an array', mail: { to: ['a@example.com', 'a@@example.com'] }, field: 'to[1]' },
    { name: 'invalid cc', mail: { cc: 'Ann <a example.com>' }, field: 'cc' },
    { name: 'invalid bcc', mail: { bcc: [{ address: 'b@example.com' }, { name: 'x' }] }, field: 'bcc[1]' },
    {
      name: 'display name with a line break',
      mail: { to: { name: 'Ann\r\nBcc: x@example.com', address: 'a@example.com' } },
      field: 'to',
    },
    { name: 'invalid from', mail: { from: 'noreply' }, field: 'from' },
    { name: 'invalid replyTo', mail: { replyTo: ['help@example.com', 'nope'] }, field: 'replyTo[1]' },
    { name: 'no recipient', mail: { to: undefined }, field: 'to' },
    { name: 'empty recipient lists', mail: { to: [], cc: [], bcc: [] }, field: 'to' },
    { name: 'missing subject', mail: { subject: undefined }, field: 'subject' },
    { name: 'blank subject', mail: { subject: '   ' }, field: 'subject' },
    { name: 'CR/LF in subject', mail: { subject: 'Hi\r\nBcc: x@example.com' }, field: 'subject' },
    { name: 'LF in subject', mail: { subject: 'Hi\nthere' }, field: 'subject' },
    { name: 'no body', mail: { text: undefined }, field: 'text' },
    { name: 'empty body', mail: { text: '', html: '' }, field: 'text' },
    { name: 'non-string text', mail: { text: ['Hello'] }, field: 'text' },
    { name: 'non-string html', mail: { html: 42 }, field: 'html' },
    { name: 'headers not an object', mail: { headers: ['X-A: b'] }, field: 'headers' },
    {
      name: 'header value with CRLF',
      mail: { headers: { 'X-Tag': 'a\r\nBcc: x@example.com' } },
      field: 'headers.X-Tag',
    },
    { name: 'non-string header value', mail: { headers: { 'X-Count': 3 } }, field: 'headers.X-Count' },
    {
      name: 'reserved Message-ID header',
      mail: { headers: { 'Message-ID': '<x@example.com>' } },
      field: 'headers.Message-ID',
    },
    { name: 'reserved bcc header, any case', mail: { headers: { bcc: 'x@example.com' } }, field: 'headers.bcc' },
    { name: 'header name with a space', mail: { headers: { 'X Tag': 'a' } }, field: 'headers.X Tag' },
    { name: 'header name with a colon', mail: { headers: { 'X-Tag:': 'a' } }, field: 'headers.X-Tag:' },
    {
      name: 'header value with a bare LF',
      mail: { headers: { 'X-Tag': 'a\nBcc: x@example.com' } },
      field: 'headers.X-Tag',
    },
    { name: 'header value with a bare CR', mail: { headers: { 'X-Tag': 'a\rb' } }, field: 'headers.X-Tag' },
    { name: 'header value with NUL', mail: { headers: { 'X-Tag': 'a\0b' } }, field: 'headers.X-Tag' },
    {
      name: 'header name with CRLF',
      mail: { headers: { 'X-Tag\r\nBcc': 'x@example.com' } },
      field: 'headers.X-Tag\r\nBcc',
    },
    {
      name: 'reserved message-id header, lower case',
      mail: { headers: { 'message-id': '<x@example.com>' } },
      field: 'headers.message-id',
    },
    { name: 'reserved To header', mail: { headers: { To: 'x@example.com' } }, field: 'headers.To' },
    { name: 'reserved From header', mail: { headers: { FROM: 'x@example.com' } }, field: 'headers.FROM' },
    {
      name: 'reserved Return-Path header',
      mail: { headers: { 'Return-Path': '<x@example.com>' } },
      field: 'headers.Return-Path',
    },
    { name: 'reserved Sender header', mail: { headers: { Sender: 'x@example.com' } }, field: 'headers.Sender' },
    {
      name: "a Content-Type of its own (the MIME structure is the builder's)",
      mail: { headers: { 'Content-Type': 'text/plain' } },
      field: 'headers.Content-Type',
    },
    {
      name: 'a Content-Transfer-Encoding of its own',
      mail: { headers: { 'content-transfer-encoding': '8bit' } },
      field: 'headers.content-transfer-encoding',
    },
    { name: 'a MIME-Version of its own', mail: { headers: { 'MIME-Version': '1.0' } }, field: 'headers.MIME-Version' },
    { name: 'a NUL in the text', mail: { text: 'Hello\0there' }, field: 'text' },
    { name: 'a lone surrogate in the html', mail: { html: '<p>\uD800</p>' }, field: 'html' },
    { name: 'a lone low surrogate in the subject', mail: { subject: 'Hi \uDC00' }, field: 'subject' },
    { name: 'a lone surrogate in a header', mail: { headers: { 'X-Tag': '\uDBFF' } }, field: 'headers.X-Tag' },
    { name: 'a NUL in an address', mail: { to: 'ann\0@example.com' }, field: 'to' },
    { name: 'a lone surrogate in an address', mail: { cc: ['a@example.com', '\uD800@example.com'] }, field: 'cc[1]' },
    { name: 'a lone surrogate in a display name', mail: { from: 'Shop \uDC00 <shop@example.com>' }, field: 'from' },
    {
      name: "an address longer than RFC 5321's 254 octets",
      mail: { to: `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(59)}.com` },
      field: 'to',
    },
    { name: 'params without a template', mail: { params: { a: 1 } }, field: 'params' },
    { name: 'locale without a template', mail: { locale: 'de' }, field: 'locale' },
    { name: 'attachments not an array', mail: { attachments: { filename: 'a.txt' } }, field: 'attachments' },
  ])('rejects $name', ({ mail, field }) => {
    const error = thrownBy(() => toMailPayload({ ...base, ...mail }, defaultFrom));
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe(field);
  });

  it.each([
    { name: 'null', mail: null },
    { name: 'a string', mail: 'a@example.com' },
  ])('rejects a mail that is $name', ({ mail }) => {
    const error = thrownBy(() => toMailPayload(mail as unknown as OutgoingMail, defaultFrom));
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe('mail');
  });
});

const orderTemplate: MailTemplate = {
  name: 'order-confirmation',
  version: 2,
  render: () => ({ subject: 'Order', html: '<p>Order</p>' }),
  validate(params: { orderId?: unknown }) {
    if (typeof params.orderId !== 'string') throw new MailValidationError('orderId', 'must be a string');
  },
};
const registry = new MailTemplateRegistry()
  .register({ ...orderTemplate, version: 1 })
  .register(orderTemplate)
  .register({ name: 'greeting', version: 1, render: () => ({ subject: 'Hi', text: 'Hi' }) })
  .register({
    name: 'strict',
    version: 1,
    render: () => ({ subject: 'x', text: 'x' }),
    validate: () => {
      throw new Error('no way');
    },
  });
const rules: MailContentRules = { templates: registry, maxMessageBytes: 1_000, resolvesReferences: true };
const templated = { to: 'a@example.com', template: 'order-confirmation', params: { orderId: 'A-7' } } as const;

describe('toMailPayload with a template', () => {
  it('stores the name, the newest version and the params instead of a body', () => {
    expect(toMailPayload(templated, defaultFrom, rules)).toStrictEqual({
      v: 2,
      from: { name: 'Shop', address: 'noreply@example.com' },
      to: [{ address: 'a@example.com' }],
      cc: [],
      bcc: [],
      replyTo: [],
      headers: {},
      template: { name: 'order-confirmation', version: 2, params: { orderId: 'A-7' } },
    });
  });

  it('keeps a subject override and a canonical locale', () => {
    const payload = toMailPayload({ ...templated, subject: 'Your order A-7', locale: 'de-at' }, defaultFrom, rules);
    expect(payload.subject).toBe('Your order A-7');
    expect(payload.template).toEqual({
      name: 'order-confirmation',
      version: 2,
      params: { orderId: 'A-7' },
      locale: 'de-AT',
    });
  });

  it('stores params as plain JSON: a Date as its ISO string, undefined properties dropped', () => {
    const params = {
      orderId: 'A-7',
      placedAt: new Date('2026-12-01T10:00:00.000Z'),
      note: undefined,
      items: [{ sku: 'X', qty: 2 }],
      gift: null,
    };
    const payload = toMailPayload({ ...templated, params }, defaultFrom, rules);
    expect(payload.template!.params).toStrictEqual({
      orderId: 'A-7',
      placedAt: '2026-12-01T10:00:00.000Z',
      items: [{ sku: 'X', qty: 2 }],
      gift: null,
    });
  });

  it('a template without params gets {}', () => {
    expect(toMailPayload({ to: 'a@example.com', template: 'greeting' }, defaultFrom, rules).template).toEqual({
      name: 'greeting',
      version: 1,
      params: {},
    });
  });

  const cyclic: Record<string, unknown> = { orderId: 'A-7' };
  cyclic.self = cyclic;

  it.each<{ name: string; mail: Record<string, unknown>; field: string; reason?: RegExp; rules?: MailContentRules }>([
    {
      name: 'an unknown template',
      mail: { template: 'nope' },
      field: 'template',
      reason: /names no registered template: "nope" \(registered: greeting, order-confirmation, strict\)/,
    },
    { name: 'a template with no registry at all', mail: {}, field: 'template', rules: {}, reason: /registered: none/ },
    { name: 'a NUL in a parameter', mail: { params: { name: 'A\0B' } }, field: 'params.name', reason: /NUL/ },
    {
      name: 'a lone surrogate in a parameter key',
      mail: { params: { ['\uD83D']: 1 } },
      field: 'params key "\\ud83d"',
      reason: /lone UTF-16 surrogate/,
    },
    {
      name: 'parameters nested deeper than 100 levels',
      mail: { params: { a: JSON.parse(`${'['.repeat(100)}1${']'.repeat(100)}`) as unknown } },
      field: `params.a${'[0]'.repeat(99)}`,
      reason: /nests deeper than 100 levels/,
    },
    { name: 'an empty template name', mail: { template: '' }, field: 'template' },
    { name: 'a template name that is not a string', mail: { template: 42 }, field: 'template' },
    { name: 'text with a template', mail: { text: 'Hello' }, field: 'text', reason: /together with template/ },
    { name: 'html with a template', mail: { html: '<p>Hello</p>' }, field: 'html', reason: /together with template/ },
    { name: 'params that are an array', mail: { params: ['A-7'] }, field: 'params' },
    { name: 'params that are a string', mail: { params: 'A-7' }, field: 'params' },
    {
      name: 'params failing the template validation',
      mail: { params: { orderId: 7 } },
      field: 'params.orderId',
      reason: /must be a string \(template "order-confirmation"@2\)/,
    },
    {
      name: 'params refused by a validate that throws an Error',
      mail: { template: 'strict' },
      field: 'params',
      reason: /refused by template "strict"@1: no way/,
    },
    {
      name: 'a function in params',
      mail: { params: { orderId: 'A-7', format: () => 'x' } },
      field: 'params.format',
      reason: /a function cannot be stored/,
    },
    {
      name: 'a class instance in params',
      mail: { params: { orderId: 'A-7', total: new Map() } },
      field: 'params.total',
      reason: /a Map cannot be stored/,
    },
    {
      name: 'NaN in params',
      mail: { params: { orderId: 'A-7', items: [{ qty: Number.NaN }] } },
      field: 'params.items[0].qty',
    },
    { name: 'a bigint in params', mail: { params: { orderId: 'A-7', cents: 10n } }, field: 'params.cents' },
    { name: 'an odd key in params', mail: { params: { orderId: 'A-7', 'a b': Symbol('x') } }, field: 'params["a b"]' },
    { name: 'a cycle in params', mail: { params: cyclic }, field: 'params.self', reason: /refers to itself/ },
    { name: 'an invalid locale', mail: { locale: 'not a locale!' }, field: 'locale' },
    { name: 'a blank subject override', mail: { subject: '  ' }, field: 'subject' },
    { name: 'a subject override with CRLF', mail: { subject: 'Hi\r\nBcc: x@example.com' }, field: 'subject' },
  ])('rejects $name', ({ mail, field, reason, rules: given }) => {
    const error = thrownBy(() => toMailPayload({ ...templated, ...mail }, defaultFrom, given ?? rules));
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe(field);
    if (reason) expect((error as MailValidationError).reason).toMatch(reason);
  });

  it('validates a copy: a validate that mutates cannot change what is stored', () => {
    const mutating: MailTemplate = {
      name: 'mutating',
      version: 1,
      render: () => ({ subject: 'x', text: 'x' }),
      validate: (params: Record<string, unknown>) => void (params.injected = true),
    };
    const payload = toMailPayload({ to: 'a@example.com', template: 'mutating', params: { a: 1 } }, defaultFrom, {
      templates: new MailTemplateRegistry().register(mutating),
    });
    expect(payload.template!.params).toEqual({ a: 1 });
  });
});

describe('toMailPayload with attachments', () => {
  const pdf = Buffer.from('%PDF-1.7 fake');

  it.each<{ name: string; attachment: Record<string, unknown>; stored: Record<string, unknown> }>([
    {
      name: 'a Buffer',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: pdf },
      stored: { filename: 'a.pdf', contentType: 'application/pdf', content: pdf.toString('base64') },
    },
    {
      name: 'a Uint8Array',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: new Uint8Array(pdf) },
      stored: { filename: 'a.pdf', contentType: 'application/pdf', content: pdf.toString('base64') },
    },
    {
      name: 'a utf8 string (the default)',
      attachment: { filename: 'a.txt', contentType: 'text/plain; charset=utf-8', content: 'héllo' },
      stored: {
        filename: 'a.txt',
        contentType: 'text/plain; charset=utf-8',
        content: Buffer.from('héllo').toString('base64'),
      },
    },
    {
      name: 'a base64 string with line breaks',
      attachment: {
        filename: 'a.pdf',
        contentType: 'application/pdf',
        content: `${pdf.toString('base64').slice(0, 8)}\r\n${pdf.toString('base64').slice(8)}`,
        encoding: 'base64',
      },
      stored: { filename: 'a.pdf', contentType: 'application/pdf', content: pdf.toString('base64') },
    },
    {
      name: 'an inline image with a cid',
      attachment: { filename: 'logo.png', contentType: 'image/png', content: pdf, cid: 'logo@shop' },
      stored: { filename: 'logo.png', contentType: 'image/png', cid: 'logo@shop', content: pdf.toString('base64') },
    },
    {
      name: 'a reference',
      attachment: { filename: 'big.zip', contentType: 'application/zip', ref: 's3://bucket/big.zip' },
      stored: { filename: 'big.zip', contentType: 'application/zip', ref: 's3://bucket/big.zip' },
    },
  ])('stores $name', ({ attachment, stored }) => {
    const payload = toMailPayload({ ...base, attachments: [attachment as never] }, defaultFrom, rules);
    expect(payload.attachments).toStrictEqual([stored]);
  });

  it.each<{ name: string; attachment: unknown; field: string; rules?: MailContentRules }>([
    { name: 'not an object', attachment: 'a.pdf', field: 'attachments[0]' },
    {
      name: 'no filename',
      attachment: { contentType: 'application/pdf', content: 'x' },
      field: 'attachments[0].filename',
    },
    {
      name: 'a filename with CRLF',
      attachment: { filename: 'a.pdf\r\nBcc: x@example.com', contentType: 'application/pdf', content: 'x' },
      field: 'attachments[0].filename',
    },
    { name: 'no content type', attachment: { filename: 'a.pdf', content: 'x' }, field: 'attachments[0].contentType' },
    {
      name: 'a filename with a lone surrogate',
      attachment: { filename: 'r\uD83D.pdf', contentType: 'application/pdf', content: 'x' },
      field: 'attachments[0].filename',
    },
    {
      name: 'a reference with a lone surrogate',
      attachment: { filename: 'a.zip', contentType: 'application/zip', ref: 's3://b/\uDE00' },
      field: 'attachments[0].ref',
    },
    {
      name: 'a content type with CRLF',
      attachment: { filename: 'a.pdf', contentType: 'text/plain\r\nBcc: x@example.com', content: 'x' },
      field: 'attachments[0].contentType',
    },
    {
      name: 'a content type without a subtype',
      attachment: { filename: 'a.pdf', contentType: 'pdf', content: 'x' },
      field: 'attachments[0].contentType',
    },
    {
      name: 'a cid with a space',
      attachment: { filename: 'a.png', contentType: 'image/png', content: 'x', cid: 'my logo' },
      field: 'attachments[0].cid',
    },
    {
      name: 'neither content nor ref',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf' },
      field: 'attachments[0].content',
    },
    {
      name: 'content that is a number',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: 42 },
      field: 'attachments[0].content',
    },
    {
      name: 'invalid base64',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: 'not base64!', encoding: 'base64' },
      field: 'attachments[0].content',
    },
    {
      name: 'an unknown encoding',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: 'x', encoding: 'hex' },
      field: 'attachments[0].encoding',
    },
    {
      name: 'an encoding with a Buffer',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: pdf, encoding: 'base64' },
      field: 'attachments[0].encoding',
    },
    {
      name: 'both content and ref',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', content: 'x', ref: 'k' },
      field: 'attachments[0].ref',
    },
    {
      name: 'an empty ref',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', ref: '' },
      field: 'attachments[0].ref',
    },
    {
      name: 'a ref without a resolver',
      attachment: { filename: 'a.pdf', contentType: 'application/pdf', ref: 'k' },
      field: 'attachments[0].ref',
      rules: { ...rules, resolvesReferences: false },
    },
  ])('rejects $name', ({ attachment, field, rules: given }) => {
    const error = thrownBy(() =>
      toMailPayload({ ...base, attachments: [attachment as never] }, defaultFrom, given ?? rules),
    );
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe(field);
  });
});

describe('the size limit', () => {
  // rules.maxMessageBytes is 1000; the base mail's subject and body are 7 bytes.
  it.each<{ name: string; mail: OutgoingMail }>([
    {
      name: 'an inline attachment that fits',
      mail: {
        ...base,
        attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', content: Buffer.alloc(993) }],
      },
    },
    {
      name: 'a referenced attachment of any size',
      mail: { ...base, attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', ref: 'huge' }] },
    },
  ])('accepts $name', ({ mail }) => {
    expect(() => toMailPayload(mail, defaultFrom, rules)).not.toThrow();
  });

  it.each<{ name: string; mail: OutgoingMail }>([
    {
      name: 'an inline attachment one byte over',
      mail: {
        ...base,
        attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', content: Buffer.alloc(994) }],
      },
    },
    {
      name: 'several attachments together over',
      mail: {
        ...base,
        attachments: [1, 2, 3].map((n) => ({
          filename: `${n}.bin`,
          contentType: 'application/octet-stream',
          content: Buffer.alloc(400),
        })),
      },
    },
    { name: 'a large html body', mail: { ...base, html: `<p>${'x'.repeat(1_000)}</p>` } },
    { name: 'large template params', mail: { ...templated, params: { orderId: 'A-7', notes: 'x'.repeat(1_000) } } },
  ])('rejects $name, counting decoded bytes', ({ mail }) => {
    const error = thrownBy(() => toMailPayload(mail, defaultFrom, rules));
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe('size');
    expect((error as Error).message).toMatch(/over maxMessageBytes \(1000\)/);
  });

  it('defaults to 5 MiB', () => {
    const attachment = (bytes: number) => ({
      ...base,
      attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', content: Buffer.alloc(bytes) }],
    });
    expect(() => toMailPayload(attachment(5 * 1024 * 1024 - 7), defaultFrom)).not.toThrow();
    expect(
      (thrownBy(() => toMailPayload(attachment(5 * 1024 * 1024 - 6), defaultFrom)) as MailValidationError).field,
    ).toBe('size');
  });
});

describe('hashableContent', () => {
  it('a plain mail hashes as its v1 payload did', () => {
    const payload = toMailPayload({ ...base, html: '<p>Hello</p>' }, defaultFrom);
    expect(JSON.stringify(hashableContent(payload))).toBe(
      JSON.stringify({
        v: 1,
        from: payload.from,
        to: payload.to,
        cc: [],
        bcc: [],
        replyTo: [],
        subject: 'Hi',
        headers: {},
        text: 'Hello',
        html: '<p>Hello</p>',
      }),
    );
  });

  it('leaves the template version out: the same enqueue after a new version is the same mail', () => {
    const older = toMailPayload(templated, defaultFrom, {
      templates: new MailTemplateRegistry().register({ ...orderTemplate, version: 1 }),
    });
    const newer = toMailPayload(templated, defaultFrom, rules);
    expect(older.template!.version).toBe(1);
    expect(newer.template!.version).toBe(2);
    expect(hashableContent(older)).toEqual(hashableContent(newer));
    expect(
      hashableContent(toMailPayload({ ...templated, params: { orderId: 'A-8' } }, defaultFrom, rules)),
    ).not.toEqual(hashableContent(newer));
  });

  it('does not depend on the order of the parameters keys', () => {
    const hash = (params: Record<string, unknown>) =>
      JSON.stringify(hashableContent(toMailPayload({ ...templated, params }, defaultFrom, rules)));
    expect(hash({ orderId: 'A-7', items: [{ sku: 'X', qty: 1 }] })).toBe(
      hash({ items: [{ qty: 1, sku: 'X' }], orderId: 'A-7' }),
    );
    expect(hash({ orderId: 'A-7', items: [1, 2] })).not.toBe(hash({ orderId: 'A-7', items: [2, 1] }));
  });
});

describe('recipientsOf', () => {
  it('lists to, cc and bcc addresses in order', () => {
    const payload = toMailPayload(
      { ...base, to: ['Ann <a@example.com>', 'b@example.com'], cc: 'c@example.com', bcc: 'd@example.com' },
      defaultFrom,
    );
    expect(recipientsOf(payload)).toEqual(['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com']);
  });
});
