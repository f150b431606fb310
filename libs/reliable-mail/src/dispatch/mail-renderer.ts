import { Readable } from 'node:stream';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { ReliableMailError } from '../errors.js';
import type { MailPayload, MailPayloadV2, StoredAttachment } from '../outbox/mail.types.js';
import type { OutboundAttachment, RenderedMail } from '../transport/mail-transport.interface.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { MailTemplateRegistry } from '../templates/mail-template.registry.js';
import {
  InvalidTemplateError,
  type MailTemplate,
  type RenderedContent,
  type TemplateVersion,
} from '../templates/mail-template.js';
import { StoredTemplateVersions } from '../templates/stored-template-versions.js';

import { LINE_BREAK_OR_NUL } from '../shared/characters.js';
import { cutText } from '../database/storable.js';

const MAX_REASON_LENGTH = 1_000;

/**
 * A stored mail that cannot be turned into a message: its template is gone or throws, its rendering is unusable,
 * or an attachment cannot be fetched. Sending it again would fail the same way, so the row fails permanently
 * with `message` as its reason.
 */
export class MailRenderError extends ReliableMailError {}

/**
 * A stored mail that this instance cannot render now, though another may, or this one later: the sources of its
 * version could not be read from the database, are of a later release, or made again with this instance's helpers
 * fail to render (a helper added by the deploy that enqueued it). The attempt is deferred; it says nothing of the
 * lane's server.
 */
export class MailRenderDeferral extends ReliableMailError {}

function messageOf(error: unknown): string {
  return cutText(error instanceof Error ? error.message : String(error), MAX_REASON_LENGTH);
}

function isReadable(value: unknown): value is Readable {
  return (
    value instanceof Readable ||
    (!!value &&
      typeof value === 'object' &&
      typeof (value as Readable).pipe === 'function' &&
      typeof (value as Readable).on === 'function')
  );
}

/** Turns a stored payload into the message of one attempt: renders its template and fetches its attachments. */
@Injectable()
export class MailRenderer {
  constructor(
    private readonly registry: MailTemplateRegistry,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: Pick<ResolvedReliableMailOptions, 'attachmentResolver'>,
    /** Where a version of a file template that this instance did not load is found; the module always gives it. */
    @Optional()
    @Inject(StoredTemplateVersions)
    private readonly storedVersions: StoredTemplateVersions | null = null,
  ) {}

  /**
   * Rejects with a `MailRenderError` when the payload cannot be sent as it is, and with a `MailRenderDeferral` (or
   * what an attachment resolver throws) when it may be later.
   */
  async render(messageId: string, payload: MailPayload, signal: AbortSignal): Promise<RenderedMail> {
    const { from, to, cc, bcc, replyTo, headers } = payload;
    if (payload.v === 1) {
      return {
        from,
        to,
        cc,
        bcc,
        replyTo,
        headers,
        subject: payload.subject,
        text: payload.text,
        html: payload.html,
        attachments: [],
      };
    }
    if (payload.v !== 2) {
      throw new MailRenderError(
        `payload version ${JSON.stringify((payload as { v?: unknown }).v)} is not one this worker can read`,
      );
    }
    const content = await this.content(messageId, payload, signal);
    const attachments = await this.resolveAttachments(payload.attachments ?? [], signal);
    const mail: RenderedMail = { from, to, cc, bcc, replyTo, headers, subject: content.subject, attachments };
    if (content.text !== undefined) mail.text = content.text;
    if (content.html !== undefined) mail.html = content.html;
    return mail;
  }

  /** The subject and parts a payload renders to, without its attachments: what the console previews. */
  async content(messageId: string, payload: MailPayloadV2, signal: AbortSignal): Promise<RenderedContent> {
    return payload.template
      ? this.renderTemplate(messageId, payload, signal)
      : { subject: payload.subject ?? '', text: payload.text, html: payload.html };
  }

  private async renderTemplate(
    messageId: string,
    payload: MailPayloadV2,
    signal: AbortSignal,
  ): Promise<RenderedContent> {
    const { name, version, params, locale } = payload.template!;
    const label = `template "${name}"@${version}`;
    const { template, restored } = await this.templateOf(name, version, label);
    let rendered: RenderedContent;
    try {
      rendered = await template.render(structuredClone(params), { locale, messageId, signal });
    } catch (error) {
      if (restored)
        throw new MailRenderDeferral(
          `${label}, made again from its stored sources with this instance's helpers, failed to render: ` +
            `${messageOf(error)}; an instance of the deploy that enqueued it may have the helpers it needs`,
        );
      throw new MailRenderError(`${label} failed to render: ${messageOf(error)}`);
    }
    if (!rendered || typeof rendered !== 'object') {
      throw new MailRenderError(
        `${label} failed to render: render returned ${rendered === null ? 'null' : typeof rendered}, not { subject, html?, text? }`,
      );
    }
    const subject = (payload.subject ?? rendered.subject) as unknown;
    if (typeof subject !== 'string' || subject.trim().length === 0) {
      throw new MailRenderError(`${label} failed to render: it rendered no subject`);
    }
    for (const part of ['html', 'text'] as const) {
      if (rendered[part] !== undefined && rendered[part] !== null && typeof rendered[part] !== 'string') {
        throw new MailRenderError(`${label} failed to render: it rendered a ${part} part that is not a string`);
      }
    }
    const html = rendered.html || undefined;
    const text = rendered.text || undefined;
    if (html === undefined && text === undefined) {
      throw new MailRenderError(`${label} failed to render: it rendered neither html nor text`);
    }
    // Header injection through a parameter is impossible: a line break in a rendered subject folds to a space. A fold
    // starts where whitespace does, or at a NUL (which \s is not): tried at each space of a long run, it took
    // quadratic time (256,000 spaces: 26 s).
    const folded = LINE_BREAK_OR_NUL.test(subject)
      ? subject.replace(/(?:(?<!\s)|(?=\0))\s*[\r\n\0]+\s*/g, ' ').trim()
      : subject;
    return { subject: folded, html, text };
  }

  /**
   * The version the row was enqueued with: registered here, or, for a template from files whose files changed since,
   * made again (`restored`) from the sources the start of the enqueuing instance kept in the database.
   */
  private async templateOf(
    name: string,
    version: TemplateVersion,
    label: string,
  ): Promise<{ template: MailTemplate; restored: boolean }> {
    const registered = this.registry.get(name, version);
    if (registered) return { template: registered, restored: false };
    const hashed = typeof version === 'string';
    if (hashed && this.storedVersions) {
      let stored: MailTemplate | undefined;
      try {
        stored = await this.storedVersions.find(name, version);
      } catch (error) {
        if (error instanceof InvalidTemplateError)
          throw new MailRenderError(`${label} cannot be made from its stored sources: ${error.reason}`);
        throw new MailRenderDeferral(`${label} cannot be made from its stored sources now: ${messageOf(error)}`);
      }
      if (stored) return { template: stored, restored: true };
    }
    const versions = this.registry.versions(name);
    throw new MailRenderError(
      `${label} is not registered (${versions.length > 0 ? `registered versions: ${versions.join(', ')}` : 'no version of it is'})` +
        `${hashed ? ' and its sources are not kept in the database' : ''}; ` +
        'a row renders only with the version it was enqueued with',
    );
  }

  private async resolveAttachments(stored: StoredAttachment[], signal: AbortSignal): Promise<OutboundAttachment[]> {
    const resolved: OutboundAttachment[] = [];
    try {
      for (const attachment of stored) {
        const { filename, contentType, cid } = attachment;
        const content =
          'ref' in attachment ? await this.resolve(attachment, signal) : Buffer.from(attachment.content, 'base64');
        resolved.push(cid === undefined ? { filename, contentType, content } : { filename, contentType, content, cid });
      }
    } catch (error) {
      // Streams opened for the attachments before the failing one would otherwise stay open.
      for (const { content } of resolved) if (isReadable(content)) content.destroy();
      throw error;
    }
    return resolved;
  }

  private async resolve(
    { filename, ref }: { filename: string; ref: string },
    signal: AbortSignal,
  ): Promise<Buffer | Readable> {
    const label = `attachment "${filename}" (ref ${JSON.stringify(ref)})`;
    const resolver = this.options.attachmentResolver;
    if (!resolver) throw new MailRenderError(`${label} could not be resolved: no attachmentResolver is configured`);
    let content: unknown;
    try {
      content = await resolver(ref, { signal });
    } catch (error) {
      throw new MailRenderError(`${label} could not be resolved: ${messageOf(error)}`);
    }
    if (Buffer.isBuffer(content)) return content;
    if (content instanceof Uint8Array) return Buffer.from(content.buffer, content.byteOffset, content.byteLength);
    if (isReadable(content)) return content;
    throw new MailRenderError(
      `${label} could not be resolved: the resolver returned ${content === null ? 'null' : typeof content}, not a Buffer or a Readable`,
    );
  }
}
