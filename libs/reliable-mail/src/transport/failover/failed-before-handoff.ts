import type { SendOutcome } from '../mail-transport.interface.js';

/**
 * Whether a send failed before the message was handed over, so that another transport may take it with no risk of a
 * second copy: the session or the account refused every message (an outage: no connection, a refused greeting or
 * login, a suspended account or key), or every recipient was deferred with no answer (the request never reached the
 * provider: connection refused, DNS, TLS) or with a 503, which says the service did not take the request in (RFC 9110
 * §15.6.4: unavailable, maintenance).
 *
 * Never after another 5xx, which may come after the message was stored: the providers' classifications read it as an
 * unknown outcome (`serverErrorStatus`). Nor after an unknown outcome (a request written with no answer, or such a
 * 5xx: the provider may have taken it; its retry is pinned to this transport), a recipient taken or refused
 * (the message itself was judged), an SMTP server's 4yz (the recipient's server defers this mail, and would another
 * provider's too), a request to slow down, which the lane honours, or a send held back or stopped at shutdown, which
 * sent nothing and is not charged.
 */
export function failedBeforeHandoff(outcome: SendOutcome): boolean {
  if (outcome.kind === 'outage') return true;
  if (outcome.slowDown || outcome.heldBack || outcome.stoppedAtShutdown) return false;
  return (
    outcome.recipients.length > 0 &&
    outcome.recipients.every(
      (recipient) =>
        recipient.status === 'deferred' &&
        (recipient.replyCode === null || (recipient.replyCode === 503 && recipient.enhancedStatus === null)),
    )
  );
}
