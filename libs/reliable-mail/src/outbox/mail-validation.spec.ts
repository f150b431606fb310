import { describe, expect, it } from '@jest/globals';
import { MailValidationError } from '../errors.js';
import type { MailPayload, OutgoingMail } from './mail.types.js';
import { recipientsOf, toMailPayload } from './mail-validation.js';

const defaultFrom = 'Shop <noreply@example.com>';
const base: OutgoingMail = { to: 'a@example.com', subject: 'Hi', text: 'Hello' };
const basePayload: MailPayload = {
  v: 1,
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
  it.each<{ name: string; mail: Partial<OutgoingMail>; expected: Partial<MailPayload> }>([
    { name: 'plain address, default from', mail: {}, expected: {} },
    { name: 'named address', mail: { to: 'Ann <a@example.com>' }, expected: { to: [{ name: 'Ann', address: 'a@example.com' }] } },
    { name: 'quoted display name', mail: { to: '"Ann Lee" <a@example.com>' }, expected: { to: [{ name: 'Ann Lee', address: 'a@example.com' }] } },
    { name: 'surrounding whitespace', mail: { to: '  a@example.com  ' }, expected: { to: [{ address: 'a@example.com' }] } },
    { name: 'object address is trimmed', mail: { to: { name: ' Bob ', address: ' b@example.com ' } }, expected: { to: [{ name: 'Bob', address: 'b@example.com' }] } },
    { name: 'object with a blank name drops it', mail: { to: { name: '  ', address: 'b@example.com' } }, expected: { to: [{ address: 'b@example.com' }] } },
    {
      name: 'mixed array',
      mail: { to: ['Ann <a@example.com>', { address: 'b@example.com' }, 'c@example.co.uk'] },
      expected: { to: [{ name: 'Ann', address: 'a@example.com' }, { address: 'b@example.com' }, { address: 'c@example.co.uk' }] },
    },
    { name: 'explicit from overrides the default', mail: { from: 'billing@example.com' }, expected: { from: { address: 'billing@example.com' } } },
    { name: 'replyTo is normalised', mail: { replyTo: 'Help <help@example.com>' }, expected: { replyTo: [{ name: 'Help', address: 'help@example.com' }] } },
    { name: 'cc-only recipient', mail: { to: undefined, cc: 'c@example.com' }, expected: { to: [], cc: [{ address: 'c@example.com' }] } },
    { name: 'bcc-only recipient', mail: { to: undefined, bcc: ['d@example.com'] }, expected: { to: [], bcc: [{ address: 'd@example.com' }] } },
    { name: 'html only', mail: { text: undefined, html: '<p>Hello</p>' }, expected: { text: undefined, html: '<p>Hello</p>' } },
    { name: 'text and html', mail: { html: '<p>Hello</p>' }, expected: { html: '<p>Hello</p>' } },
    { name: 'extra headers are kept', mail: { headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@example.com>' } }, expected: { headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@example.com>' } } },
  ])('$name', ({ mail, expected }) => {
    const payload = toMailPayload({ ...base, ...mail }, defaultFrom);
    const wanted: MailPayload = { ...basePayload, ...expected };
    if (wanted.text === undefined) delete wanted.text;
    expect(payload).toStrictEqual(wanted);
  });

  it.each<{ name: string; mail: Record<string, unknown>; field: string }>([
    { name: 'invalid to address', mail: { to: 'not-an-address' }, field: 'to' },
    { name: 'address without a dotted domain', mail: { to: 'a@localhost' }, field: 'to' },
    { name: 'invalid address in an array', mail: { to: ['a@example.com', 'a@@example.com'] }, field: 'to[1]' },
    { name: 'invalid cc', mail: { cc: 'Ann <a example.com>' }, field: 'cc' },
    { name: 'invalid bcc', mail: { bcc: [{ address: 'b@example.com' }, { name: 'x' }] }, field: 'bcc[1]' },
    { name: 'display name with a line break', mail: { to: { name: 'Ann\r\nBcc: x@example.com', address: 'a@example.com' } }, field: 'to' },
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
    { name: 'header value with CRLF', mail: { headers: { 'X-Tag': 'a\r\nBcc: x@example.com' } }, field: 'headers.X-Tag' },
    { name: 'non-string header value', mail: { headers: { 'X-Count': 3 } }, field: 'headers.X-Count' },
    { name: 'reserved Message-ID header', mail: { headers: { 'Message-ID': '<x@example.com>' } }, field: 'headers.Message-ID' },
    { name: 'reserved bcc header, any case', mail: { headers: { bcc: 'x@example.com' } }, field: 'headers.bcc' },
    { name: 'header name with a space', mail: { headers: { 'X Tag': 'a' } }, field: 'headers.X Tag' },
    { name: 'header name with a colon', mail: { headers: { 'X-Tag:': 'a' } }, field: 'headers.X-Tag:' },
  ])('rejects $name', ({ mail, field }) => {
    const error = thrownBy(() => toMailPayload({ ...base, ...mail } as OutgoingMail, defaultFrom));
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

describe('recipientsOf', () => {
  it('lists to, cc and bcc addresses in order', () => {
    const payload = toMailPayload({ ...base, to: ['Ann <a@example.com>', 'b@example.com'], cc: 'c@example.com', bcc: 'd@example.com' }, defaultFrom);
    expect(recipientsOf(payload)).toEqual(['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com']);
  });
});
