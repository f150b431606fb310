import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';

/** nodemailer's pooled SMTP options; `pool` and `maxRequeues` are fixed by reliable-mail (see `SmtpMailTransport`). */
export type SmtpTransportOptions = Omit<SMTPPool.Options, 'pool' | 'maxRequeues'>;

/** The SMTP timeouts used when the transport options do not set them; all of them must fit in the lease. */
export const DEFAULT_SMTP_TIMEOUTS = {
  connectionTimeout: 30_000,
  greetingTimeout: 30_000,
  socketTimeout: 120_000,
} as const;
