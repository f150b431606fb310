import { SmtpSession } from './smtp-session.js';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';

/** An idle connection is closed after this long: servers drop idle sessions themselves after a few minutes. */
const IDLE_TIMEOUT_MS = 30_000;

/**
 * The SMTP connections of one lane. The lane's `concurrency` bounds the sends in flight, so a send never waits
 * for a connection: it takes an idle one or opens its own, and at most `size` stay open when idle. A connection that
 * carried `maxMessages` is replaced at once, off the path of any send: the next mail, maybe a login code into an idle
 * lane, finds one open rather than paying a connect, a greeting and an EHLO (and the server's reverse lookup).
 */
export class SmtpSessionPool {
  private readonly idle: Array<{ session: SmtpSession; timer: NodeJS.Timeout }> = [];
  private closed = false;
  /** Aborted at close: a replacement still connecting is given up. */
  private readonly closing = new AbortController();

  constructor(
    private readonly options: ResolvedSmtpOptions,
    private readonly size: number,
  ) {}

  async acquire(signal: AbortSignal): Promise<SmtpSession> {
    while (this.idle.length > 0) {
      const { session, timer } = this.idle.pop()!;
      clearTimeout(timer);
      if (session.usable) return session;
    }
    return SmtpSession.open(this.options, signal);
  }

  /**
   * Returns a connection after a send. One that carried a transient failure is closed instead, so the retry gets a
   * fresh session rather than the one a sick server or a broken state gave the failure on.
   */
  release(session: SmtpSession, reusable: boolean): void {
    if (!reusable || this.closed || !session.usable) {
      session.quit();
      return;
    }
    if (session.messages >= this.options.maxMessages) {
      session.quit();
      void this.openReplacement();
      return;
    }
    this.keepIdle(session);
  }

  private keepIdle(session: SmtpSession): void {
    if (this.idle.length >= this.size) {
      session.quit();
      return;
    }
    const timer = setTimeout(() => {
      const index = this.idle.findIndex((entry) => entry.session === session);
      if (index >= 0) this.idle.splice(index, 1);
      session.quit();
    }, IDLE_TIMEOUT_MS);
    timer.unref();
    this.idle.push({ session, timer });
  }

  /** A replacement that cannot be opened is no failure of anything: the next send opens its own and says why. */
  private async openReplacement(): Promise<void> {
    let session: SmtpSession;
    try {
      session = await SmtpSession.open(this.options, this.closing.signal);
    } catch {
      return;
    }
    if (this.closed) session.quit();
    else this.keepIdle(session);
  }

  close(): void {
    this.closed = true;
    this.closing.abort();
    for (const { session, timer } of this.idle.splice(0)) {
      clearTimeout(timer);
      session.quit();
    }
  }
}
