import { MailValidationError } from '../../errors.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../../options/resolve-options.js';
import type { StoredTemplate } from '../mail.types.js';

/** The parts of a mail that count against `maxMessageBytes`; referenced attachments are fetched later and do not. */
export interface CountedParts {
  subject: string | undefined;
  text: string | undefined;
  html: string | undefined;
  template: StoredTemplate | undefined;
  headers: Record<string, string>;
  /** Inline attachments, decoded. */
  attachmentBytes: number;
}

/** Refuses a mail larger than `maxMessageBytes`, naming its size. */
export function checkSize(parts: CountedParts, maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): void {
  const { subject, text, html, template, headers } = parts;
  const size =
    Buffer.byteLength(subject ?? '') +
    Buffer.byteLength(text ?? '') +
    Buffer.byteLength(html ?? '') +
    (template ? Buffer.byteLength(JSON.stringify(template.params)) : 0) +
    Object.entries(headers).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value),
      0,
    ) +
    parts.attachmentBytes;
  if (size > maxMessageBytes) {
    throw new MailValidationError(
      'size',
      `of ${size} bytes (subject, body or template params, headers and inline attachments) is over maxMessageBytes (${maxMessageBytes}); ` +
        'attach large files by ref, fetched at send time by the attachmentResolver',
    );
  }
}
