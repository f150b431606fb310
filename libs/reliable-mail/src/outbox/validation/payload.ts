import { MailValidationError } from '../../errors.js';
import type { MailPayloadV2, OutgoingMail, StoredTemplate } from '../mail.types.js';
import { parseAddress, parseAddressList } from './addresses.js';
import { parseAttachments } from './attachments.js';
import { LINE_BREAK_OR_NUL } from '../../shared/characters.js';
import { checkStorable } from './json.js';
import type { MailContentRules } from './content-rules.js';
import { parseHeaders } from './headers.js';
import { checkSize } from './size.js';
import { parseTemplate } from './template-params.js';

function optionalString(field: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') {
    throw new MailValidationError(field, 'must be a string');
  }
  if (value !== undefined) checkStorable(field, value);
  return value;
}

function checkSubject(subject: unknown): string {
  if (typeof subject !== 'string' || subject.trim().length === 0) {
    throw new MailValidationError('subject', 'is required');
  }
  if (LINE_BREAK_OR_NUL.test(subject)) {
    throw new MailValidationError('subject', 'must not contain CR, LF or NUL');
  }
  checkStorable('subject', subject);
  return subject;
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

  checkSize({ subject, text, html, template, headers, attachmentBytes: attachments.bytes }, rules.maxMessageBytes);

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
