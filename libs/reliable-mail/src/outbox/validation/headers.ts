import { MailValidationError } from '../../errors.js';
import type { OutgoingMail } from '../mail.types.js';
import { unstorableIn } from '../../database/storable.js';
import { LINE_BREAK_OR_NUL } from '../../shared/characters.js';

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
  // The MIME structure is the message builder's: another Content-Type would make the body unreadable.
  'content-type',
  'content-transfer-encoding',
  'mime-version',
]);

export function parseHeaders(headers: OutgoingMail['headers']): Record<string, string> {
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
    if (typeof value !== 'string' || LINE_BREAK_OR_NUL.test(value) || unstorableIn(value)) {
      throw new MailValidationError(`headers.${name}`, 'must be a string without CR, LF, NUL or a lone surrogate');
    }
  }
  return { ...headers };
}
