import { constants } from 'node:fs';
import { access, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ReliableMailSetupError } from '../../errors.js';
import { everyRecipientDeferred } from '../deferred-outcome.js';
import { composeMime, releaseAttachmentStreams } from '../outbound-content.js';
import type { MailTransport, OutboundMessage, SendOutcome } from '../mail-transport.interface.js';

export interface EmlFileTransportOptions {
  /** Where each message is written, as `<time>-<Message-ID>.eml`; made when missing. */
  directory: string;
}

/** Errors of the directory rather than of one message: the lane is out, as with a server that refuses sessions. */
const DIRECTORY_FAULTS = new Set(['EACCES', 'EPERM', 'ENOSPC', 'EDQUOT', 'EROFS', 'ENOENT', 'ENOTDIR', 'EEXIST']);

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** A Message-ID as a file name: `<id@domain>` keeps its letters, digits, `.`, `_`, `-` and `@`. */
function fileNameOf(messageId: string, now: Date): string {
  const id = messageId
    .replace(/^<|>$/g, '')
    .replace(/[^A-Za-z0-9._@-]+/g, '_')
    .slice(0, 150);
  return `${now.toISOString().replace(/[:.]/g, '-')}-${id}.eml`;
}

/**
 * Writes each message, as it would go over SMTP (the same MIME, the stored Message-ID), to a file in `directory`,
 * with no server: for development, previews and demos. Every recipient counts as accepted once the file is in
 * place; the file is written under a temporary name and renamed, so that a reader never sees half of one. A
 * directory that cannot be written to (a missing permission, a full disk) is an outage of the lane, as a server that
 * refuses the session is: the mail waits, no attempt is charged. Bcc recipients are not in the file's headers, as
 * on the wire.
 */
export class EmlFileTransport implements MailTransport {
  private readonly directory: string;

  constructor(options: EmlFileTransportOptions) {
    if (!options || typeof options.directory !== 'string' || options.directory.trim() === '') {
      throw new ReliableMailSetupError('EmlFileTransport needs { directory }: where to write the .eml files');
    }
    this.directory = resolve(options.directory);
  }

  async send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    let raw: Buffer;
    try {
      raw = await composeMime(message.messageId, message.mail, signal);
    } catch (error) {
      return everyRecipientDeferred(message.recipients, `the message could not be built: ${messageOf(error)}`);
    } finally {
      releaseAttachmentStreams(message.mail);
    }
    const name = fileNameOf(message.messageId, new Date());
    const temporary = join(this.directory, `.${name}.partial`);
    try {
      await mkdir(this.directory, { recursive: true });
      await writeFile(temporary, raw, { signal, flag: 'wx' });
      await rename(temporary, join(this.directory, name));
    } catch (error) {
      await rm(temporary, { force: true }).catch(() => undefined);
      const reason = `could not write the .eml file: ${messageOf(error)}`;
      // The directory itself (missing rights, a full or read-only disk): every mail would fail alike, so the lane
      // waits as for a server that is down. Anything else (a deadline, this message) is this mail's retry.
      if (!signal.aborted && DIRECTORY_FAULTS.has((error as NodeJS.ErrnoException).code ?? '')) {
        return { kind: 'outage', replyCode: null, enhancedStatus: null, reply: reason };
      }
      return everyRecipientDeferred(message.recipients, reason);
    }
    const reply = `written to ${name}`;
    return {
      kind: 'attempted',
      recipients: message.recipients.map((address) => ({
        address,
        status: 'accepted',
        replyCode: null,
        enhancedStatus: null,
        reply,
        perRecipient: false,
      })),
      reply,
      providerMessageId: null,
      slowDown: false,
    };
  }

  /** The directory exists (or is made) and may be written to. */
  async verify(): Promise<void> {
    await mkdir(this.directory, { recursive: true });
    await access(this.directory, constants.W_OK);
  }

  async close(): Promise<void> {
    // Nothing stays open between sends.
  }
}
