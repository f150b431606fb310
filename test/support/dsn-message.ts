// DSN emails as RFC 3464 describes them (multipart/report; report-type=delivery-status), in the shape Postfix
// writes: a human-readable part, the machine-readable delivery status, and the returned message or its headers.

export interface DsnRecipient {
  address: string;
  /** `Original-Recipient`, when the reporting server gives it. */
  original?: string;
  action: 'failed' | 'delayed' | 'delivered' | 'relayed';
  status: string;
  diagnostic?: string;
}

export interface DsnOptions {
  /** Where the DSN is sent: the original's envelope sender (a VERP address, or the sender's own). */
  to: string;
  recipients: DsnRecipient[];
  /** The original message, returned whole (`message/rfc822`) or as its headers (`text/rfc822-headers`). */
  original?: { raw: string; as: 'message' | 'headers' };
  /** The DSN's own Message-ID. */
  messageId?: string;
}

export function dsnMessage({ to, recipients, original, messageId }: DsnOptions): string {
  const lines = [
    'Return-Path: <>',
    `Delivered-To: ${to}`,
    'From: MAILER-DAEMON@mx.example.org (Mail Delivery System)',
    `To: ${to}`,
    'Subject: Undelivered Mail Returned to Sender',
    ...(messageId ? [`Message-ID: ${messageId}`] : []),
    'Date: Thu, 3 Dec 2026 10:10:10 +0000',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status;',
    '\tboundary="DSN-BOUNDARY"',
    '',
    '--DSN-BOUNDARY',
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host mx.example.org.',
    '',
    "I'm sorry to have to inform you that your message could not be delivered to one or more recipients.",
    '',
    '--DSN-BOUNDARY',
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.org',
    'X-Postfix-Queue-ID: 4BZ1x2',
    'Arrival-Date: Thu,  3 Dec 2026 10:10:09 +0000 (UTC)',
    ...recipients.flatMap((recipient) => [
      '',
      `Final-Recipient: rfc822; ${recipient.address}`,
      ...(recipient.original ? [`Original-Recipient: rfc822;${recipient.original}`] : []),
      `Action: ${recipient.action}`,
      `Status: ${recipient.status}`,
      'Remote-MTA: dns; mail.example.org',
      ...(recipient.diagnostic ? foldedField('Diagnostic-Code', `smtp; ${recipient.diagnostic}`) : []),
      'Last-Attempt-Date: Thu,  3 Dec 2026 10:10:10 +0000 (UTC)',
    ]),
    '',
  ];
  if (original) {
    const headersOnly = original.raw.split(/\r?\n\r?\n/, 1)[0];
    lines.push(
      '--DSN-BOUNDARY',
      `Content-Description: Undelivered Message${original.as === 'headers' ? ' Headers' : ''}`,
      `Content-Type: ${original.as === 'headers' ? 'text/rfc822-headers' : 'message/rfc822'}`,
      '',
      original.as === 'headers' ? headersOnly : original.raw,
      '',
    );
  }
  lines.push('--DSN-BOUNDARY--', '');
  return lines.join('\r\n');
}

/** A long field over two lines, as servers fold their diagnostics. */
function foldedField(name: string, value: string): string[] {
  const cut = value.indexOf(' ', 40);
  return cut < 0 ? [`${name}: ${value}`] : [`${name}: ${value.slice(0, cut)}`, `    ${value.slice(cut + 1)}`];
}

/** An out-of-office reply to a VERP address: it quotes the original Message-ID, but it is no DSN. */
export function autoReply(to: string, inReplyTo: string): string {
  return [
    'From: Ann <ann@example.org>',
    `To: ${to}`,
    'Subject: Out of office: Your order',
    `In-Reply-To: ${inReplyTo}`,
    `References: ${inReplyTo}`,
    'Auto-Submitted: auto-replied',
    'Message-ID: <ooo-1@example.org>',
    'Date: Thu, 3 Dec 2026 10:10:10 +0000',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'I am away until Monday. Status: 5.1.1 of my inbox is "full of joy".',
    '',
  ].join('\r\n');
}
