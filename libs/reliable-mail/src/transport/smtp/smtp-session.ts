import { Readable } from 'node:stream';
import SMTPConnection, { type SMTPConnectionSendInfo } from 'nodemailer/lib/smtp-connection';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';
import type { SmtpError } from './smtp-reply.js';
import { SendDeadlineError } from '../outbound-content.js';

/**
 * How far a transaction got when it failed: the whole message written (the final dot may have reached the server,
 * which may then hold the message: RFC 1047's window), part of it, or only the envelope.
 */
export type TransactionStage = 'envelope' | 'body' | 'written';

export type TransactionResult =
  | { ok: true; info: SMTPConnectionSendInfo }
  | {
      ok: false;
      error: SmtpError & { rejectedErrors?: Array<SmtpError & { recipient?: string }> };
      stage: TransactionStage;
    };

/** How long a RSET may take before the connection is given up instead. */
const RESET_TIMEOUT_MS = 5_000;

/**
 * One SMTP connection (nodemailer's SMTPConnection), with what its callbacks leave out: connect and login report
 * their failures through the 'error' and 'end' events only, and `close()` never calls a pending callback, so each
 * step here settles on whichever comes first, and on the caller's abort signal.
 */
export class SmtpSession {
  /** Messages sent on this connection, against `maxMessages`. */
  messages = 0;
  private constructor(private readonly connection: SMTPConnection) {}

  /** Connects, says EHLO (and STARTTLS where asked), and logs in when credentials are given. */
  static async open(options: ResolvedSmtpOptions, signal: AbortSignal): Promise<SmtpSession> {
    const {
      auth,
      maxMessages: _messages,
      maxRecipientsPerTransaction: _recipients,
      dkim: _dkim,
      ...connectionOptions
    } = options;
    const connection = new SMTPConnection({ ...connectionOptions, logger: false });
    const session = new SmtpSession(connection);
    await session.step(signal, (done) => connection.connect(done));
    if (auth && connection.allowsAuth) await session.step(signal, (done) => connection.login(auth, done));
    // From here on a failure reaches the send's callback as well; the event alone must not crash the process.
    connection.on('error', () => undefined);
    return session;
  }

  /** Whether the connection can take another message. */
  get usable(): boolean {
    return !this.connection.destroyed;
  }

  /** Runs one SMTP transaction (MAIL FROM, RCPT TO for each recipient, DATA) for `message`. */
  transact(from: string, recipients: string[], message: Buffer, signal: AbortSignal): Promise<TransactionResult> {
    // A stream per transaction: how far it was read tells how far the conversation got.
    const body = Readable.from([message]);
    const stage = (): TransactionStage => (body.readableEnded ? 'written' : body.readableDidRead ? 'body' : 'envelope');
    return new Promise((resolve) => {
      let settled = false;
      const settle = (result: TransactionResult) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        this.connection.removeListener('end', onEnd);
        resolve(result);
      };
      const onEnd = () =>
        settle({ ok: false, error: { code: 'ECONNECTION', message: 'the connection closed' }, stage: stage() });
      const onAbort = () => {
        settle({ ok: false, error: new SendDeadlineError('the send deadline passed'), stage: stage() });
        this.close();
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.connection.once('end', onEnd);
      this.messages++;
      // A new envelope object each time: nodemailer writes its bookkeeping into the one it is given.
      this.connection.send({ from, to: [...recipients] }, body, (error, info) =>
        settle(error ? { ok: false, error: error, stage: stage() } : { ok: true, info }),
      );
    });
  }

  /** RSET after a refused transaction, so the next one starts clean; false when the connection should be dropped. */
  async reset(): Promise<boolean> {
    if (!this.usable) return false;
    const timeout = AbortSignal.timeout(RESET_TIMEOUT_MS);
    try {
      await this.step(timeout, (done) => this.connection.reset(done));
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    this.connection.close();
  }

  /** Says goodbye (QUIT), for a connection closed in good order. */
  quit(): void {
    if (this.usable) this.connection.quit();
  }

  /** Settles on the callback, the first 'error' or 'end', or the abort, and closes the connection on a failure. */
  private step(signal: AbortSignal, run: (done: (error?: Error | null) => void) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        this.connection.removeListener('error', finish);
        this.connection.removeListener('end', onEnd);
        if (error === undefined || error === null) return resolve();
        this.close();
        reject(error instanceof Error ? error : new Error(JSON.stringify(error)));
      };
      const onEnd = () => finish(Object.assign(new Error('the connection closed'), { code: 'ECONNECTION' }));
      const onAbort = () => finish(new SendDeadlineError('the send deadline passed'));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.connection.once('error', finish);
      this.connection.once('end', onEnd);
      run((error) => finish(error ?? undefined));
    });
  }
}
