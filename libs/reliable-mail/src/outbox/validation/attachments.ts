import { MailValidationError } from '../../errors.js';
import type { StoredAttachment } from '../mail.types.js';
import { CONTROL_CHARACTER } from '../../shared/characters.js';
import type { MailContentRules } from './content-rules.js';
import { checkStorable } from './json.js';

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// type/subtype with optional parameters, as in `text/plain; charset=utf-8`.
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const CONTENT_TYPE_PATTERN = new RegExp(
  `^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"[^"\\\\\\x00-\\x1f]*"))*$`,
);
const CID_PATTERN = /^[^\s<>()[\]\\,;:"]{1,250}$/;
const MAX_FILENAME_LENGTH = 255;
const MAX_REF_LENGTH = 2_048;

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
  for (const [key, value] of Object.entries({ filename, contentType, cid, ref })) {
    if (typeof value === 'string') checkStorable(`${field}.${key}`, value);
  }
  if (
    typeof filename !== 'string' ||
    filename.trim().length === 0 ||
    filename.length > MAX_FILENAME_LENGTH ||
    CONTROL_CHARACTER.test(filename)
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
    if (typeof ref !== 'string' || ref.length === 0 || ref.length > MAX_REF_LENGTH || CONTROL_CHARACTER.test(ref)) {
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

export function parseAttachments(
  input: unknown,
  rules: MailContentRules,
): { stored: StoredAttachment[]; bytes: number } {
  if (input === undefined) return { stored: [], bytes: 0 };
  if (!Array.isArray(input)) throw new MailValidationError('attachments', 'must be an array');
  const parsed = input.map((attachment, index) => parseAttachment(`attachments[${index}]`, attachment, rules));
  return { stored: parsed.map((entry) => entry.stored), bytes: parsed.reduce((sum, entry) => sum + entry.bytes, 0) };
}
