import { MailFeedbackEvent } from './mail-feedback.event.js';

/**
 * The recipient's server took the message (the provider's delivery report, or a DSN with `Action: delivered`):
 * more than `EmailSentEvent`, which only says that the next hop took it.
 */
export class EmailDeliveredEvent extends MailFeedbackEvent {
  constructor(props: EmailDeliveredEvent) {
    super(props);
  }
}
