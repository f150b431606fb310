import { MailFeedbackEvent } from './mail-feedback.event.js';

/**
 * The recipient marked the message as spam (a feedback loop report through the provider). The recipient goes on
 * the suppression list: mailing a complainer again is what raises a complaint rate until an account is suspended.
 */
export class EmailComplainedEvent extends MailFeedbackEvent {
  /**
   * Whether this complaint puts (or keeps) the recipient on the suppression list: false only where the report
   * cannot say which of several recipients complained (see the README's feedback sources).
   */
  declare readonly suppressed: boolean;
  /** Whether the report proves it speaks for this recipient (see `EmailBouncedEvent.authenticated`); always so today. */
  declare readonly authenticated: boolean;

  constructor(props: EmailComplainedEvent) {
    super(props);
  }
}
