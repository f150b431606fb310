import { MailValidationError } from '../errors.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../templates/content-options.js';
import type { MailTemplate } from '../templates/mail-template.js';
import type {
  JsonValue,
  MailAddress,
  MailAddressInput,
  MailPayload,
  MailPayloadV2,
  OutgoingMail,
  StoredAttachment,
  StoredTemplate,
  TemplateMail,
} from './mail.types.js';

// A deliberately plain addr-spec check: one @, no spaces or brackets, a dotted domain. Exotic quoted local parts
// are refused rather than risked, since a bad address would only fail later at the SMTP server.
const ADDRESS_PATTERN = /^[^\s@<>()[\]\\,;:"]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i;
const NAMED_ADDRESS_PATTERN = /^\s*"?([^"<]*?)"?\s*<([^<>]+)>\s*$/;
const HEADER_NAME_PATTERN = /^[!-9;-~]+$/;
const RESERVED_HEADERS = new Set([
  'message-id',
  'from',
  'to',
  'cc',
  'bcc',
  'reply-to',
  'subject',
  'date',
  'sender',
  'return-path',
]);
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

/** What enqueue checks a mail's content against, beyond its own shape. */
export interface MailContentRules {
  /** The registered templates; without them a templated mail is refused. */
  templates?: { latest(name: string): MailTemplate | undefined; names(): string[] };
  /** The largest subject, body (or template parameters), headers and inline attachments, in bytes. Default 5 MiB. */
  maxMessageBytes?: number;
  /** Whether an `attachmentResolver` is configured: a referenced attachment needs one. */
  resolvesReferences?: boolean;
}

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// type/subtype with optional parameters, as in `text/plain; charset=utf-8`.
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const CONTENT_TYPE_PATTERN = new RegExp(
  `^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"[^"\\\\\\x00-\\x1f]*"))*$`,
);
const CID_PATTERN = /^[^\s<>()[\]\\,;:"]{1,250}$/;
const MAX_FILENAME_LENGTH = 255;
const MAX_REF_LENGTH = 2_048;

function optionalString(field: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') {
    throw new MailValidationError(field, 'must be a string');
  }
  return value;
}

function checkSubject(subject: unknown): string {
  if (typeof subject !== 'string' || subject.trim().length === 0) {
    throw new MailValidationError('subject', 'is required');
  }
  if (CONTROL_CHARACTERS.test(subject)) {
    throw new MailValidationError('subject', 'must not contain CR, LF or NUL');
  }
  return subject;
}

/**
 * The parameters as they will be stored: plain JSON, with a Date as its ISO string (what JSON makes of it).
 * Anything JSON would silently drop or mangle (a function, a class instance, NaN, a bigint, a cycle) is refused.
 */
function toJsonValue(field: string, value: unknown, seen: Set<object>): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new MailValidationError(field, `must be plain JSON: ${value} is not a finite number`);
    return value;
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new MailValidationError(field, 'must be plain JSON: the Date is invalid');
    return value.toISOString();
  }
  if (typeof value !== 'object') {
    throw new MailValidationError(field, `must be plain JSON: a ${typeof value} cannot be stored`);
  }
  if (seen.has(value)) throw new MailValidationError(field, 'must be plain JSON: it refers to itself');
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item, index) => toJsonValue(`${field}[${index}]`, item, seen));
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new MailValidationError(
        field,
        `must be plain JSON: a ${prototype?.constructor?.name ?? 'class instance'} cannot be stored`,
      );
    }
    const result: Record<string, JsonValue> = {};
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue;
      result[key] = toJsonValue(
        /^[A-Za-z_$][\w$]*$/.test(key) ? `${field}.${key}` : `${field}[${JSON.stringify(key)}]`,
        item,
        seen,
      );
    }
    return result;
  } finally {
    seen.delete(value);
  }
}

function parseLocale(locale: unknown): string | undefined {
  if (locale === undefined) return undefined;
  if (typeof locale !== 'string' || locale.length === 0) {
    throw new MailValidationError('locale', 'must be a BCP 47 language tag such as "en" or "de-AT"');
  }
  try {
    return Intl.getCanonicalLocales(locale)[0];
  } catch {
    throw new MailValidationError('locale', `is not a BCP 47 language tag: ${JSON.stringify(locale)}`);
  }
}

/** Resolves the template to its newest version and checks the parameters with the template's own validation. */
function parseTemplate(mail: TemplateMail<object>, rules: MailContentRules): StoredTemplate {
  const { template: name, params = {} } = mail;
  if (typeof name !== 'string' || name.length === 0) {
    throw new MailValidationError('template', 'must be the name of a registered template');
  }
  for (const part of ['text', 'html'] as const) {
    if ((mail as unknown as Record<string, unknown>)[part] !== undefined) {
      throw new MailValidationError(part, 'cannot be given together with template: the template renders the body');
    }
  }
  const template = rules.templates?.latest(name);
  if (!template) {
    const known = rules.templates?.names() ?? [];
    throw new MailValidationError(
      'template',
      `names no registered template: ${JSON.stringify(name)} (registered: ${known.length > 0 ? known.join(', ') : 'none'})`,
    );
  }
  if (!params || typeof params !== 'object' || Array.isArray(params)) {
    throw new MailValidationError('params', 'must be a plain object of JSON values');
  }
  const stored = toJsonValue('params', params, new Set()) as Record<string, JsonValue>;
  if (template.validate) {
    try {
      template.validate(structuredClone(stored));
    } catch (error) {
      const label = `template "${name}"@${template.version}`;
      if (error instanceof MailValidationError) {
        const field =
          error.field === 'params' || error.field.startsWith('params.') || error.field.startsWith('params[')
            ? error.field
            : `params.${error.field}`;
        throw new MailValidationError(field, `${error.reason} (${label})`);
      }
      throw new MailValidationError(
        'params',
        `are refused by ${label}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  const locale = parseLocale(mail.locale);
  return locale === undefined
    ? { name, version: template.version, params: stored }
    : { name, version: template.version, params: stored, locale };
}

function parseAttachment(
  field: string,
  input: unknown,
  rules: MailContentRules,
): { stored: StoredAttachment; bytes: number } {
  if (!input || typeof input !== 'object' || Array.isArray(input)) {
    throw new MailValidationError(
      field,
      'must be { filename, contentType, content } or { filename, contentType, ref }',
    );
  }
  const { filename, contentType, cid, content, ref, encoding } = input as Record<string, unknown>;
  if (
    typeof filename !== 'string' ||
    filename.trim().length === 0 ||
    filename.length > MAX_FILENAME_LENGTH ||
    /[\0-\x1f\x7f]/.test(filename)
  ) {
    throw new MailValidationError(
      `${field}.filename`,
      `must be a name of 1 to ${MAX_FILENAME_LENGTH} characters without control characters`,
    );
  }
  if (typeof contentType !== 'string' || !CONTENT_TYPE_PATTERN.test(contentType)) {
    throw new MailValidationError(
      `${field}.contentType`,
      `must be a media type such as "application/pdf", got ${JSON.stringify(contentType)}`,
    );
  }
  if (cid !== undefined && (typeof cid !== 'string' || !CID_PATTERN.test(cid))) {
    throw new MailValidationError(`${field}.cid`, 'must be a Content-ID without spaces, brackets or line breaks');
  }
  const common = cid === undefined ? { filename, contentType } : { filename, contentType, cid };
  if (ref !== undefined) {
    if (content !== undefined) throw new MailValidationError(`${field}.ref`, 'cannot be given together with content');
    if (typeof ref !== 'string' || ref.length === 0 || ref.length > MAX_REF_LENGTH || /[\0-\x1f\x7f]/.test(ref)) {
      throw new MailValidationError(
        `${field}.ref`,
        `must be a string of 1 to ${MAX_REF_LENGTH} characters without control characters`,
      );
    }
    if (!rules.resolvesReferences) {
      throw new MailValidationError(
        `${field}.ref`,
        'needs an attachmentResolver in the module options to be fetched at send time',
      );
    }
    return { stored: { ...common, ref }, bytes: 0 };
  }
  let bytes: Buffer;
  if (Buffer.isBuffer(content)) {
    bytes = content;
  } else if (content instanceof Uint8Array) {
    bytes = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  } else if (typeof content === 'string') {
    if (encoding !== undefined && encoding !== 'utf8' && encoding !== 'base64') {
      throw new MailValidationError(`${field}.encoding`, 'must be "utf8" or "base64"');
    }
    if (encoding === 'base64') {
      const compact = content.replace(/\s+/g, '');
      if (!BASE64_PATTERN.test(compact)) throw new MailValidationError(`${field}.content`, 'is not valid base64');
      bytes = Buffer.from(compact, 'base64');
    } else {
      bytes = Buffer.from(content, 'utf8');
    }
  } else {
    throw new MailValidationError(
      `${field}.content`,
      'must be a string, a Buffer or a Uint8Array (or give a ref instead)',
    );
  }
  if (encoding !== undefined && typeof content !== 'string') {
    throw new MailValidationError(`${field}.encoding`, 'applies to string content only');
  }
  return { stored: { ...common, content: bytes.toString('base64') }, bytes: bytes.length };
}

function parseAttachments(input: unknown, rules: MailContentRules): { stored: StoredAttachment[]; bytes: number } {
  if (input === undefined) return { stored: [], bytes: 0 };
  if (!Array.isArray(input)) throw new MailValidationError('attachments', 'must be an array');
  const parsed = input.map((attachment, index) => parseAttachment(`attachments[${index}]`, attachment, rules));
  return { stored: parsed.map((entry) => entry.stored), bytes: parsed.reduce((sum, entry) => sum + entry.bytes, 0) };
}

/**
 * Turns what a caller passed to `enqueue` into the stored payload, or throws the first problem found. A mail
 * either carries its body (`subject` with `text` and/or `html`) or names a `template` with `params`.
 */
export function toMailPayload(mail: OutgoingMail, defaultFrom: string, rules: MailContentRules = {}): MailPayloadV2 {
  if (!mail || typeof mail !== 'object') {
    throw new MailValidationError('mail', 'must be an object');
  }
  const to = parseAddressList('to', mail.to);
  const cc = parseAddressList('cc', mail.cc);
  const bcc = parseAddressList('bcc', mail.bcc);
  if (to.length + cc.length + bcc.length === 0) {
    throw new MailValidationError('to', 'is required: a mail needs at least one recipient in to, cc or bcc');
  }
  const templated = mail.template !== undefined;
  const subject = templated && mail.subject === undefined ? undefined : checkSubject(mail.subject);
  let template: StoredTemplate | undefined;
  let text: string | undefined;
  let html: string | undefined;
  if (templated) {
    template = parseTemplate(mail, rules);
  } else {
    for (const part of ['params', 'locale'] as const) {
      if ((mail as unknown as Record<string, unknown>)[part] !== undefined)
        throw new MailValidationError(part, 'is only allowed together with template');
    }
    text = optionalString('text', mail.text);
    html = optionalString('html', mail.html);
    if (!text && !html) {
      throw new MailValidationError('text', 'or html is required: a mail needs a body');
    }
  }
  const headers = parseHeaders(mail.headers);
  const attachments = parseAttachments(mail.attachments, rules);

  const maxMessageBytes = rules.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const size =
    Buffer.byteLength(subject ?? '') +
    Buffer.byteLength(text ?? '') +
    Buffer.byteLength(html ?? '') +
    (template ? Buffer.byteLength(JSON.stringify(template.params)) : 0) +
    Object.entries(headers).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value),
      0,
    ) +
    attachments.bytes;
  if (size > maxMessageBytes) {
    throw new MailValidationError(
      'size',
      `of ${size} bytes (subject, body or template params, headers and inline attachments) is over maxMessageBytes (${maxMessageBytes}); ` +
        'attach large files by ref, fetched at send time by the attachmentResolver',
    );
  }

  // The key order of a plain mail is that of a v1 payload, so that its idempotency hash stays the same.
  const payload: MailPayloadV2 = {
    v: 2,
    from: parseAddress('from', mail.from ?? defaultFrom),
    to,
    cc,
    bcc,
    replyTo: parseAddressList('replyTo', mail.replyTo),
    ...(subject === undefined ? {} : { subject }),
    headers,
  };
  if (text) payload.text = text;
  if (html) payload.html = html;
  if (template) payload.template = template;
  if (attachments.stored.length > 0) payload.attachments = attachments.stored;
  return payload;
}

/**
 * What the idempotency hash of a payload covers: what the caller said, not what reliable-mail chose. The template
 * version is left out (the same enqueue after a new version is registered is the same mail), the order of the
 * parameters' keys does not matter, and a plain mail hashes as its v1 form did (a key used before the upgrade
 * still matches its row).
 */
export function hashableContent(payload: MailPayload): unknown {
  if (payload.v !== 2) return payload;
  const { template, ...rest } = payload;
  const hashable: Record<string, unknown> = { ...rest, v: template || rest.attachments ? 2 : 1 };
  if (template)
    hashable.template = { name: template.name, params: sortedKeys(template.params), locale: template.locale };
  return hashable;
}

/** The same JSON with the keys of every object in order, so that `{ a, b }` and `{ b, a }` are one mail. */
function sortedKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys(value[key])]),
  );
}

/** Every envelope recipient of a payload, in order. */
export function recipientsOf(payload: MailPayload): string[] {
  return [...payload.to, ...payload.cc, ...payload.bcc].map((recipient) => recipient.address);
}

/** A bare address, checked and in lower case, as the suppression list keeps it. */
export function normalizeAddress(field: string, input: string): string {
  return parseAddress(field, input).address.toLowerCase();
}
