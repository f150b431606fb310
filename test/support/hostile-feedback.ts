import fc from 'fast-check';
import {
  diagnostic,
  hostileDate,
  hostileText,
  hostileValue,
  jsonText,
  orHostile,
  RawJson,
  recipient,
} from './hostile-input.js';

// Feedback as each provider sends it, realistic enough to be read and stored, with hostile values in any field.

/** What the reports may name: the rows' ids, Message-IDs and provider ids, and their recipients. */
export interface KnownMail {
  messageIds: string[];
  providerIds: string[];
  recipients: string[];
}

const providerId = (known: KnownMail) => fc.oneof(fc.constantFrom(...known.providerIds), hostileText);
const messageId = (known: KnownMail) => fc.oneof(fc.constantFrom(...known.messageIds), hostileText);

/** A Postmark webhook record (Bounce, SpamComplaint or Delivery), as JSON text. */
export function postmarkRecord(known: KnownMail): fc.Arbitrary<string> {
  return fc
    .record(
      {
        RecordType: orHostile(fc.constantFrom('Bounce', 'SpamComplaint', 'Delivery')),
        ID: orHostile(
          fc.oneof(
            fc.bigInt({ min: 0n, max: 10n ** 30n }).map((id) => new RawJson(String(id))),
            hostileText,
          ),
        ),
        Type: orHostile(fc.constantFrom('HardBounce', 'SoftBounce', 'SpamComplaint', 'Transient', 'AutoResponder')),
        MessageID: orHostile(providerId(known)),
        Email: orHostile(recipient(known.recipients)),
        Recipient: orHostile(recipient(known.recipients)),
        BouncedAt: orHostile(hostileDate),
        DeliveredAt: orHostile(hostileDate),
        Details: orHostile(diagnostic),
        Description: orHostile(hostileText),
        Metadata: hostileValue,
      },
      { requiredKeys: [] },
    )
    .map(jsonText);
}

/** A Resend event (email.bounced, .complained, .delivered, .delivery_delayed), as JSON text. */
export function resendEvent(known: KnownMail): fc.Arbitrary<string> {
  return fc
    .record(
      {
        type: orHostile(
          fc.constantFrom(
            'email.bounced',
            'email.complained',
            'email.delivered',
            'email.delivery_delayed',
            'email.opened',
          ),
        ),
        created_at: orHostile(hostileDate),
        data: orHostile(
          fc.record(
            {
              email_id: orHostile(providerId(known)),
              to: orHostile(
                fc.oneof(recipient(known.recipients), fc.array(recipient(known.recipients), { maxLength: 3 })),
              ),
              subject: hostileText,
              bounce: orHostile(
                fc.record({
                  type: orHostile(fc.constantFrom('Permanent', 'Transient')),
                  message: orHostile(diagnostic),
                }),
              ),
              tags: hostileValue,
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: [] },
    )
    .map(jsonText);
}

/** An SES notification (the SNS message's `Message`), of either style, as JSON text. */
export function sesNotification(known: KnownMail): fc.Arbitrary<string> {
  const recipients = (fields: Record<string, fc.Arbitrary<unknown>>) =>
    orHostile(fc.array(orHostile(fc.record(fields, { requiredKeys: [] })), { maxLength: 3 }));
  return fc
    .record(
      {
        style: fc.constantFrom('notificationType', 'eventType'),
        type: orHostile(fc.constantFrom('Bounce', 'Complaint', 'Delivery', 'DeliveryDelay', 'Open')),
        mail: orHostile(
          fc.record(
            {
              messageId: orHostile(providerId(known)),
              commonHeaders: orHostile(fc.record({ messageId: orHostile(messageId(known)) }, { requiredKeys: [] })),
              headers: orHostile(
                fc.array(fc.record({ name: fc.constant('Message-ID'), value: orHostile(messageId(known)) })),
              ),
              tags: hostileValue,
            },
            { requiredKeys: [] },
          ),
        ),
        bounce: orHostile(
          fc.record(
            {
              bounceType: orHostile(fc.constantFrom('Permanent', 'Transient', 'Undetermined')),
              timestamp: orHostile(hostileDate),
              bouncedRecipients: recipients({
                emailAddress: orHostile(recipient(known.recipients)),
                status: orHostile(fc.constantFrom('5.1.1', '4.2.2')),
                diagnosticCode: orHostile(diagnostic),
              }),
            },
            { requiredKeys: [] },
          ),
        ),
        complaint: orHostile(
          fc.record(
            {
              timestamp: orHostile(hostileDate),
              complaintFeedbackType: orHostile(hostileText),
              complainedRecipients: recipients({ emailAddress: orHostile(recipient(known.recipients)) }),
            },
            { requiredKeys: [] },
          ),
        ),
        delivery: orHostile(
          fc.record(
            {
              timestamp: orHostile(hostileDate),
              recipients: orHostile(fc.array(orHostile(recipient(known.recipients)), { maxLength: 3 })),
              smtpResponse: orHostile(diagnostic),
            },
            { requiredKeys: [] },
          ),
        ),
        deliveryDelay: orHostile(
          fc.record(
            {
              timestamp: orHostile(hostileDate),
              delayType: orHostile(hostileText),
              delayedRecipients: recipients({
                emailAddress: orHostile(recipient(known.recipients)),
                status: orHostile(hostileText),
                diagnosticCode: orHostile(diagnostic),
              }),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: ['style', 'type'] },
    )
    .map(({ style, type, ...rest }) => jsonText({ [style]: type, ...rest }));
}

/** Header text of one line: hostile text without line breaks, or an encoded word of any bytes in any of these charsets. */
const headerText = fc.oneof(
  hostileText.map((text) => text.replace(/[\r\n]/g, ' ')),
  fc
    .tuple(
      fc.constantFrom('UTF-16LE', 'UTF-16BE', 'UTF-8', 'ISO-8859-1', 'x-unknown'),
      fc.uint8Array({ maxLength: 40 }),
    )
    .map(([charset, bytes]) => `=?${charset}?B?${Buffer.from(bytes).toString('base64')}?=`),
);

/** A DSN email (multipart/report; report-type=delivery-status) with hostile headers and delivery-status fields. */
export function dsnEmail(known: KnownMail, verpAddresses: string[]): fc.Arbitrary<string> {
  const field = (name: string, value: fc.Arbitrary<string>) =>
    fc.option(
      value.map((text) => `${name}: ${text}`),
      { nil: undefined, freq: 4 },
    );
  const recipientGroup = fc
    .tuple(
      field(
        'Final-Recipient',
        fc.oneof(
          recipient(known.recipients).map((address) => `rfc822; ${address}`),
          headerText,
        ),
      ),
      field(
        'Original-Recipient',
        recipient(known.recipients).map((address) => `rfc822;${address}`),
      ),
      field(
        'Action',
        fc.oneof(fc.constantFrom('failed', 'delayed', 'delivered', 'relayed', 'Failed (permanent)'), headerText),
      ),
      field('Status', fc.oneof(fc.constantFrom('5.1.1', '5.2.2', '4.4.7', '2.0.0'), headerText)),
      field(
        'Diagnostic-Code',
        diagnostic.map((text) => `smtp; ${text.replace(/[\r\n]/g, ' ')}`),
      ),
      field(
        'Last-Attempt-Date',
        hostileDate.map((text) => text.replace(/[\r\n]/g, ' ')),
      ),
    )
    .map((fields) => fields.filter((line) => line !== undefined).join('\r\n'));
  return fc
    .record({
      to: fc.oneof(fc.constantFrom(...verpAddresses), headerText),
      from: headerText,
      subject: headerText,
      date: hostileDate.map((text) => text.replace(/[\r\n]/g, ' ')),
      messageId: fc.option(headerText, { nil: undefined }),
      arrival: hostileDate.map((text) => text.replace(/[\r\n]/g, ' ')),
      recipients: fc.array(recipientGroup, { minLength: 1, maxLength: 3 }),
      returned: fc.option(
        messageId(known).map((id) => id.replace(/[\r\n]/g, ' ')),
        { nil: undefined },
      ),
    })
    .map(({ to, from, subject, date, messageId: id, arrival, recipients, returned }) =>
      [
        `Delivered-To: ${to}`,
        `To: ${to}`,
        `From: ${from}`,
        `Subject: ${subject}`,
        ...(id === undefined ? [] : [`Message-ID: ${id}`]),
        `Date: ${date}`,
        'MIME-Version: 1.0',
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"',
        '',
        '--B',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Undeliverable.',
        '--B',
        'Content-Type: message/delivery-status',
        '',
        'Reporting-MTA: dns; mx.example.org',
        `Arrival-Date: ${arrival}`,
        ...recipients.flatMap((group) => ['', group]),
        '',
        ...(returned === undefined
          ? []
          : ['--B', 'Content-Type: text/rfc822-headers', '', `Message-ID: ${returned}`, 'Subject: Your order', '']),
        '--B--',
        '',
      ].join('\r\n'),
    );
}
