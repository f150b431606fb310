import type { Readable } from 'node:stream';
import { InvalidOptionsError } from '../errors.js';
import type { ReliableMailOptions } from '../reliable-mail.options.js';
import type { MailTemplate } from './mail-template.js';

/** Injection token of the resolved content options (templates, size limit, attachment resolver). */
export const MAIL_CONTENT_OPTIONS = Symbol('reliable-mail:content-options');

/** 5 MiB: the default `maxMessageBytes`. */
export const DEFAULT_MAX_MESSAGE_BYTES = 5 * 1024 * 1024;

/**
 * Fetches a referenced attachment at send time: the bytes, or a stream the SMTP transport reads while it sends.
 * A throw or a rejected promise fails the row permanently, with the error's message as the reason.
 */
export type AttachmentResolver = (
  ref: string,
) => Promise<Buffer | Uint8Array | Readable> | Buffer | Uint8Array | Readable;

export interface ResolvedContentOptions {
  templates: MailTemplate[];
  maxMessageBytes: number;
  attachmentResolver: AttachmentResolver | null;
}

/** Applies the defaults of the content options and rejects those the module cannot work with. */
export function resolveContentOptions(options: ReliableMailOptions): ResolvedContentOptions {
  const { templates = [], maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES, attachmentResolver } = options ?? {};
  if (!Array.isArray(templates)) {
    throw new InvalidOptionsError('templates', 'must be an array of mail templates');
  }
  if (typeof maxMessageBytes !== 'number' || !Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1) {
    throw new InvalidOptionsError('maxMessageBytes', `must be an integer >= 1, got ${JSON.stringify(maxMessageBytes)}`);
  }
  if (attachmentResolver !== undefined && typeof attachmentResolver !== 'function') {
    throw new InvalidOptionsError('attachmentResolver', 'must be a function (ref) => Promise<Buffer | Readable>');
  }
  return { templates, maxMessageBytes, attachmentResolver: attachmentResolver ?? null };
}
