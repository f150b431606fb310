import { SmtpSession } from './smtp-session.js';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';

/** An idle connection is closed after this long: servers drop idle sessions themselves after a few minutes. */
const IDLE_TIMEOUT_MS = 30_000;

/**
 * The SMTP connections of one lane. The lane's `concurrency` bounds the sends in flight, so a send never waits
 * for a connection: it takes an idle one or opens its own, and at most `size` stay open when idle.
 */
export class SmtpSessionPool {
  private readonly idle: Array<{ session: SmtpSession; timer: NodeJS.Timeout }> = [];
  private closed = false;

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
    if (!reusable || this.closed || !session.usable || session.messages >= this.options.maxMessages) {
      session.quit();
      return;
    }
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

  close(): void {
    this.closed = true;
    for (const { session, timer } of this.idle.splice(0)) {
      clearTimeout(timer);
      session.quit();
    }
  }
}
