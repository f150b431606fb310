import type { MailTemplate } from '../../templates/mail-template.js';

/** What enqueue checks a mail's content against, beyond its own shape. */
export interface MailContentRules {
  /** The registered templates; without them a templated mail is refused. */
  templates?: { latest(name: string): MailTemplate | undefined; names(): string[] };
  /** The largest subject, body (or template parameters), headers and inline attachments, in bytes. Default 5 MiB. */
  maxMessageBytes?: number;
  /** Whether an `attachmentResolver` is configured: a referenced attachment needs one. */
  resolvesReferences?: boolean;
}
