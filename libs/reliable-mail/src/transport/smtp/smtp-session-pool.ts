import { deadline } from '../outbound-content.js';
import { SmtpSession } from './smtp-session.js';
import type { ResolvedSmtpOptions } from './smtp-transport-options.js';

/** An idle connection is closed after this long: servers drop idle sessions themselves after a few minutes. */
const IDLE_TIMEOUT_MS = 30_000;

/**
 * The SMTP connections of one lane. The lane's `concurrency` bounds the sends in flight, so a send never waits
 * for a connection: it takes an idle one, or the one being opened ahead, or opens its own, and at most `size` stay
 * open when idle. A connection is opened ahead when the lane starts, to replace one that carried `maxMessages`, and
 * when a send has taken the last one left while the lane has room for another: the next mail, maybe a login code
 * arriving while the one before is still being sent, finds one open rather than paying a connect, a greeting and an
 * EHLO. The greeting alone may be long on purpose: servers pause before it to catch clients that talk too soon
 * (smtp-server 100 ms, Postfix's postscreen up to 6 s); in `npm run bench` a login code that came while the one
 * before was being sent opened a connection of its own and took 130-150 ms instead of 10-40.
 */
export class SmtpSessionPool {
  private readonly idle: Array<{ session: SmtpSession; timer: NodeJS.Timeout }> = [];
  /** A connection being opened ahead of any send, null once it failed; the first send to need one takes it. */
  private ahead: Promise<SmtpSession | null> | null = null;
  /** Connections handed to sends and not yet given back. */
  private inUse = 0;
  private closed = false;
  /** Aborted at close: a replacement still connecting is given up. */
  private readonly closing = new AbortController();

  constructor(
    private readonly options: ResolvedSmtpOptions,
    private readonly size: number,
  ) {}

  async acquire(signal: AbortSignal): Promise<SmtpSession> {
    const session = await this.take(signal);
    this.inUse++;
    // None left for the next send: one is opened while this one talks, so that a send arriving meanwhile does not
    // open its own and wait for the greeting on its path. Only once this one's opened: a server refusing
    // connections gets no more attempts than sends.
    if (this.idle.length === 0 && this.inUse < this.size) this.openAhead();
    return session;
  }

  private async take(signal: AbortSignal): Promise<SmtpSession> {
    while (this.idle.length > 0) {
      const { session, timer } = this.idle.pop()!;
      clearTimeout(timer);
      if (session.usable) return session;
    }
    const ahead = this.ahead;
    if (ahead) {
      this.ahead = null;
      // A send that reaches its deadline first gives up, as it would on a connection of its own; the connection is
      // closed once open.
      const session = await Promise.race([ahead, deadline(signal, 'a connection was being opened')]).catch(
        (error: unknown) => {
          void ahead.then((opened) => opened?.quit());
          throw error;
        },
      );
      if (session?.usable) return session;
    }
    return SmtpSession.open(this.options, signal);
  }

  /** Opens a connection ahead of the next send, unless one is being opened; a failure is left for a send to meet. */
  openAhead(): void {
    if (this.closed || this.ahead) return;
    const ahead = SmtpSession.open(this.options, this.closing.signal).catch(() => null);
    this.ahead = ahead;
    void ahead.then((session) => {
      // Taken by a send meanwhile: it is that send's.
      if (this.ahead !== ahead) return;
      this.ahead = null;
      if (!session) return;
      if (this.closed) session.quit();
      // Under those already idle: a send takes the connection used last, so the least used ones time out first.
      else this.keepIdle(session, 'under');
    });
  }

  /**
   * Returns a connection after a send. One that carried a transient failure is closed instead, so the retry gets a
   * fresh session rather than the one a sick server or a broken state gave the failure on.
   */
  release(session: SmtpSession, reusable: boolean): void {
    this.inUse--;
    if (!reusable || this.closed || !session.usable) {
      session.quit();
      return;
    }
    if (session.messages >= this.options.maxMessages) {
      session.quit();
      this.openAhead();
      return;
    }
    this.keepIdle(session);
  }

  /** Keeps a connection opened outside any send (`verify`) for the next one. */
  adopt(session: SmtpSession): void {
    if (this.closed || !session.usable) session.quit();
    else this.keepIdle(session);
  }

  private keepIdle(session: SmtpSession, place: 'over' | 'under' = 'over'): void {
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
    if (place === 'over') this.idle.push({ session, timer });
    else this.idle.unshift({ session, timer });
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
