import type { Readable } from 'node:stream';

/** An address with its display name, as a rendered mail carries it. */
export interface MailAddress {
  name?: string;
  address: string;
}

/** An attachment as the transport sends it: inline ones decoded, referenced ones resolved. */
export interface OutboundAttachment {
  filename: string;
  contentType: string;
  content: Buffer | Readable;
  /** Content-ID, for an image the html shows inline. */
  cid?: string;
}

/** A mail ready for the wire: its template rendered and its attachments fetched. */
export interface RenderedMail {
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  replyTo: MailAddress[];
  subject: string;
  text?: string;
  html?: string;
  headers: Record<string, string>;
  attachments: OutboundAttachment[];
}

/** One attempt to send one row. */
export interface OutboundMessage {
  /** The stored Message-ID, the same on every attempt. */
  messageId: string;
  /**
   * The row's idempotency key, or its id when it has none; the same on every attempt. A provider that
   * deduplicates requests by key is given this, so a retry after an unknown outcome is not sent twice. A
   * non-transactional lane's copy for one recipient has `<key>:<recipient>`.
   */
  idempotencyKey: string;
  /** The lane the row is sent through; a provider transport may map it to a stream of its own. */
  lane: string;
  /** The mail as rendered for this attempt. Its headers name every recipient, whoever gets it this time. */
  mail: RenderedMail;
  /**
   * The SMTP envelope sender (MAIL FROM, where bounce emails go) of each recipient of `recipients`, when it is not
   * the mail's From: with the module's `verp` option, each recipient's own VERP address (its row and an HMAC of the
   * recipient), so each recipient takes a transaction of its own. They are all on the module's own domain, so a
   * server that refuses one refuses the lane. Transports that send through an HTTP API ignore them.
   */
  envelopeSenders?: Readonly<Record<string, string>>;
  /**
   * The envelope of this attempt, lower case: the recipients not yet accepted, refused or suppressed. A retry after
   * some recipients were deferred sends the same message (and Message-ID) to those only.
   */
  recipients: string[];
  /**
   * Those of `recipients` an earlier attempt may have reached: it wrote the request and got no answer or a provider's
   * 5xx other than 503 (`unknown`), or its worker died mid-send. A provider that refuses a key reused with another
   * body (Resend's 409) then knows the key's first request was this row's own, and took the message. Empty or absent
   * on a first attempt.
   */
  possiblyTakenBefore?: string[];
  /**
   * The transport (a `FailoverTransport` entry's name) the earlier attempt that may have reached them went through,
   * when it recorded one: a retry then goes through it alone, so that a mail the provider may have taken never
   * reaches another provider too.
   */
  possiblyTakenThrough?: string;
  /**
   * Aborted when the app begins to shut down. A transport that sends a message in several requests or transactions
   * makes no further one once it is, and reports the rest deferred, so that what went out is settled before the
   * process exits rather than sent again after the lease. It never cuts a request or transaction under way.
   */
  stopping?: AbortSignal;
  /**
   * When the send's deadline falls (`signal` of `send` aborts then), in ms since the epoch. A transport that could
   * only wait past it to make its first request (a provider's Retry-After) reports `heldBack` at once instead.
   */
  deadlineAt?: number;
}

/**
 * What became of a recipient: `accepted` (the server or provider took responsibility for the message), `deferred`
 * (a 4yz, an HTTP 429 or 503, or the send failed before the message could have been taken: retried), `refused` (a
 * 5yz, or an API's refusal of the message or the recipient: final), or `unknown` (the whole message was written and
 * no answer came, or a provider's other 5xx, which may follow its storing: retried, and the copy may be a duplicate
 * unless the provider deduplicates it by key).
 */
export type RecipientStatus = 'accepted' | 'deferred' | 'refused' | 'unknown';

export interface RecipientOutcome {
  /** Lower case, as in `OutboundMessage.recipients`. */
  address: string;
  status: RecipientStatus;
  /** The SMTP reply code, or the HTTP status of a provider's answer; null when no answer came. */
  replyCode: number | null;
  /** The RFC 3463 enhanced status of an SMTP reply; null for HTTP providers. */
  enhancedStatus: string | null;
  /** The reply line, or the provider's status, error name and message (`422 validation_error: …`). */
  reply: string | null;
  /**
   * Whether the reply concerned this recipient alone (its RCPT, or a transaction it was the only recipient of): only
   * then does a hard bounce (5.1.1) put the address on the suppression list.
   */
  perRecipient: boolean;
  /**
   * The provider's id of the request that took the message for this recipient. A mail may go in several requests,
   * each with an id of its own, and a webhook names the one its recipient was in.
   */
  providerMessageId?: string | null;
}

/** What one send came to. A transport never throws for what the server or the network did: it reports it here. */
export type SendOutcome =
  | {
      kind: 'attempted';
      /** Every recipient of `OutboundMessage.recipients`, each once. */
      recipients: RecipientOutcome[];
      /** The reply that accepted the message for some recipients (2yz after the final dot, or the API's answer). */
      reply: string | null;
      /** The provider's id of the accepted message (a queue id in the 250 reply, an API's message id). */
      providerMessageId: string | null;
      /** The id the provider gave this request (SES `x-amzn-RequestId`), for its support; null when none. */
      providerRequestId?: string | null;
      /** When the provider took the message: its own timestamp where the API gives one, else when its answer came. */
      acceptedAt?: Date | null;
      /**
       * The provider deduplicates requests by `OutboundMessage.idempotencyKey` (Resend, for 24 hours): the retry of an
       * `unknown` outcome cannot deliver a second copy. Recorded on the attempt.
       */
      deduplicatedByKey?: boolean;
      /** The server asks to slow down (421 4.7.x, rate limits, HTTP 429): the lane pauses. */
      slowDown: boolean;
      /**
       * How long the provider asked to wait before the next request (an HTTP `Retry-After`), in ms: the lane pauses at
       * least that long, and a provider transport holds back every request it has not made yet.
       */
      retryAfterMs?: number;
      /**
       * The app began to shut down between two requests or transactions (`OutboundMessage.stopping`), and the
       * recipients not reached yet are reported deferred: the attempt is not charged, and they go at the next claim.
       */
      stoppedAtShutdown?: boolean;
      /**
       * The transport held the send back: a provider's Retry-After (or its rate limit) allowed no request before the
       * send's deadline (`OutboundMessage.deadlineAt`), and the recipients not reached are reported deferred. As with
       * `stoppedAtShutdown`, the attempt is not charged and records no failed event; the lane waits `retryAfterMs`,
       * and the row goes again once it resumes.
       */
      heldBack?: boolean;
      /**
       * The name of the transport that made the attempt, in a lane of several (`FailoverTransport`): recorded with it.
       * At most 64 characters; a longer one is left out.
       */
      transport?: string;
    }
  | {
      /**
       * The lane's server or account refuses every message right now: no connection, a refused greeting, EHLO or
       * login, the module's own sender refused, a suspended account or a rejected API key. Nothing about this message
       * was learned, so the row is not charged an attempt; the lane backs off and tries again.
       */
      kind: 'outage';
      replyCode: number | null;
      enhancedStatus: string | null;
      reply: string;
      providerRequestId?: string | null;
      /** As for `attempted`: the lane's pause lasts at least this long. */
      retryAfterMs?: number;
      /** As for `attempted`. */
      transport?: string;
    };

/** A provider account's sending limits, as its API reports them. */
export interface ProviderSendQuota {
  /** The most messages a second; null for none. */
  perSecond: number | null;
  /** The most messages in a rolling 24 hours; null for none (SES's -1). */
  perDay: number | null;
  /** The messages the account sent in the last 24 hours, from every sender on it, when the provider tells. */
  sentLast24Hours?: number;
}

/** What the module tells a transport at start-up. */
export interface TransportContext {
  /**
   * The module's `from` address, lower case. A provider that refuses this sender refuses every message of the lane
   * (an outage); refusing another sender concerns only the mails that use it.
   */
  defaultSender: string;
}

/**
 * Sends one message. The SMTP transport implements it over its own SMTP connections, and the Amazon SES, Postmark and
 * Resend transports over their APIs; another provider plugs in by implementing it (an object given as `transport`)
 * and classifying its own answers into a `SendOutcome`.
 */
export interface MailTransport {
  /**
   * Sends the message to `message.recipients`, with `message.messageId` as its Message-ID. It never throws for what
   * the server, the provider or the network did: it classifies it. When `signal` aborts (the dispatcher's send
   * deadline), the send must stop at once and report what it knows: recipients whose message may have been taken
   * (the request was written, no answer came) are `unknown`, the others `deferred`.
   */
  send(message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome>;
  /**
   * Called once at start-up, before any send (a provider transport loads its SDK here); a rejection stops the
   * module from starting.
   */
  open?(context: TransportContext): Promise<void>;
  /**
   * Called when a dispatcher starts sending through the transport: it may open a connection ahead, so that the first
   * mail does not pay for it. It must not throw; a failure is for the first send to meet and report.
   */
  warm?(): void;
  /** Resolves when the server or the API answers and accepts the credentials (the health check's `verifyTransports`). */
  verify(): Promise<void>;
  /**
   * The account's sending limits as the provider reports them (SES: `GetAccount`'s `SendQuota`), for a lane whose
   * `quota` says `'provider'`; null when the provider reports none. Rejects when the provider could not be asked:
   * the lane keeps the limits it read before, and asks again later.
   */
  sendQuota?(signal: AbortSignal): Promise<ProviderSendQuota | null>;
  /** Called at shutdown, once per transport object, after the sends in flight. */
  close(): Promise<void>;
}
