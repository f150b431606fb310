import type { BounceType } from '../outbox/feedback.types.js';
import { MailFeedbackEvent } from './mail-feedback.event.js';

/**
 * The recipient's server, or the provider, will not deliver the message. A `hard` bounce (the address is bad for
 * good) puts the recipient on the suppression list; a `soft` one (a full mailbox, a refusal of this message, a
 * greylisting that outlasted the provider's retries) does not.
 */
export class EmailBouncedEvent extends MailFeedbackEvent {
  declare readonly bounceType: BounceType;
  /** Whether this bounce puts (or keeps) the recipient on the suppression list. */
  declare readonly suppressed: boolean;
  /**
   * Whether the report proves it speaks for this recipient: a provider's verified webhook, or a DSN that came to the
   * VERP address made for this recipient of this row. A DSN linked by its Message-ID or by a VERP address of before
   * per-recipient tokens, or naming a recipient its address was not made for, is not (anyone can send one): it is
   * stored and reported, and suppresses nobody.
   */
  declare readonly authenticated: boolean;

  constructor(props: EmailBouncedEvent) {
    super(props);
  }
}
