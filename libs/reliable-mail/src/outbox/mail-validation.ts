import { MailValidationError } from '../errors.js';
import type { MailAddress, MailAddressInput, MailPayload, OutgoingMail } from './mail.types.js';

// A deliberately plain addr-spec check: one @, no spaces or brackets, a dotted domain. Exotic quoted local parts
// are refused rather than risked, since a bad address would only fail later at the SMTP server.
const ADDRESS_PATTERN = /^[^\s@<>()[\]\\,;:"]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i;
const NAMED_ADDRESS_PATTERN = /^\s*"?([^"<]*?)"?\s*<([^<>]+)>\s*$/;
const HEADER_NAME_PATTERN = /^[!-9;-~]+$/;
const RESERVED_HEADERS = new Set(['message-id', 'from', 'to', 'cc', 'bcc', 'reply-to', 'subject', 'date', 'sender', 'return-path']);
const CONTROL_CHARACTERS = /[\r\n\0]/;

function parseAddress(field: string, input: MailAddressInput): MailAddress {
  let name: string | undefined;
  let address: string;
  if (typeof input === 'string') {
    const named = NAMED_ADDRESS_PATTERN.exec(input);
    name = named?.[1]?.trim() || undefined;
    address = (named ? named[2] : input).trim();
  } else if (input && typeof input === 'object' && typeof input.address === 'string') {
    name = input.name?.trim() || undefined;
    address = input.address.trim();
  } else {
    throw new MailValidationError(field, 'must be an email address or { name, address }');
  }
  if (!ADDRESS_PATTERN.test(address)) {
    throw new MailValidationError(field, `is not a valid email address: ${JSON.stringify(address)}`);
  }
  if (name !== undefined && CONTROL_CHARACTERS.test(name)) {
    throw new MailValidationError(field, 'has a display name with a line break');
  }
  return name === undefined ? { address } : { name, address };
}

function parseAddressList(field: string, input: MailAddressInput | MailAddressInput[] | undefined): MailAddress[] {
  if (input === undefined || input === null) {
    return [];
  }
  const list = Array.isArray(input) ? input : [input];
  return list.map((item, index) => parseAddress(Array.isArray(input) ? `${field}[${index}]` : field, item));
}

function parseHeaders(headers: OutgoingMail['headers']): Record<string, string> {
  if (headers === undefined) {
    return {};
  }
  if (!headers || typeof headers !== 'object' || Array.isArray(headers)) {
    throw new MailValidationError('headers', 'must be an object of header names to string values');
  }
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME_PATTERN.test(name)) {
      throw new MailValidationError(`headers.${name}`, 'is not a valid header name');
    }
    if (RESERVED_HEADERS.has(name.toLowerCase())) {
      throw new MailValidationError(`headers.${name}`, 'is set by reliable-mail and cannot be overridden');
    }
    if (typeof value !== 'string' || CONTROL_CHARACTERS.test(value)) {
      throw new MailValidationError(`headers.${name}`, 'must be a string without CR, LF or NUL');
    }
  }
  return { ...headers };
}

/** Turns what a caller passed to `enqueue` into the stored payload, or throws the first problem found. */
export function toMailPayload(mail: OutgoingMail, defaultFrom: string): MailPayload {
  if (!mail || typeof mail !== 'object') {
    throw new MailValidationError('mail', 'must be an object');
  }
  const to = parseAddressList('to', mail.to);
  const cc = parseAddressList('cc', mail.cc);
  const bcc = parseAddressList('bcc', mail.bcc);
  if (to.length + cc.length + bcc.length === 0) {
    throw new MailValidationError('to', 'is required: a mail needs at least one recipient in to, cc or bcc');
  }
  if (typeof mail.subject !== 'string' || mail.subject.trim().length === 0) {
    throw new MailValidationError('subject', 'is required');
  }
  if (CONTROL_CHARACTERS.test(mail.subject)) {
    throw new MailValidationError('subject', 'must not contain CR, LF or NUL');
  }
  for (const part of ['text', 'html'] as const) {
    if (mail[part] !== undefined && typeof mail[part] !== 'string') {
      throw new MailValidationError(part, 'must be a string');
    }
  }
  if (!mail.text && !mail.html) {
    throw new MailValidationError('text', 'or html is required: a mail needs a body');
  }
  const payload: MailPayload = {
    v: 1,
    from: parseAddress('from', mail.from ?? defaultFrom),
    to,
    cc,
    bcc,
    replyTo: parseAddressList('replyTo', mail.replyTo),
    subject: mail.subject,
    headers: parseHeaders(mail.headers),
  };
  if (mail.text) payload.text = mail.text;
  if (mail.html) payload.html = mail.html;
  return payload;
}

/** Every envelope recipient of a payload, in order. */
export function recipientsOf(payload: MailPayload): string[] {
  return [...payload.to, ...payload.cc, ...payload.bcc].map((recipient) => recipient.address);
}
