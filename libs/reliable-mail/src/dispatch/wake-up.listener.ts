import type { Socket } from 'node:net';
import { Injectable, Logger } from '@nestjs/common';
import type pg from 'pg';
import { OutboxDatabase } from '../database/outbox-database.js';
import { LISTEN } from '../outbox/sql/notify.js';
import { WAKE_UP_CHANNEL } from '../reliable-mail.constants.js';

const FIRST_RETRY_MS = 1_000;
const LONGEST_RETRY_MS = 30_000;
/**
 * A LISTEN connection whose server vanished without a reset never errors: only a statement notices. One every
 * 30 s bounds how long wake-ups can be silently lost (polling still runs meanwhile).
 */
const HEARTBEAT_MS = 30_000;
/**
 * Failures in a row (some 3 s) before the listener says so itself: a database going away fails this connection first
 * (its session is ended at once), and by then the pool's statements have reported the outage, which covers it.
 */
const FAILURES_BEFORE_OWN_LINE = 3;

/** Why the listener does not listen at all (`lastError`): a transaction pooler keeps no session to LISTEN on. */
const POLLING_ONLY =
  "polling only: database.pooler is 'transaction', which delivers no notifications, and no database.listenUrl is set";

/** What the health indicator shows of the wake-up listener. */
export interface WakeUpState {
  listening: boolean;
  /** Since when it has been listening, or failing. */
  since: Date;
  /** Connection attempts that failed in a row, and the last error: a standby, a server in recovery, an outage. */
  failures: number;
  lastError: string | null;
}

/**
 * Holds one connection of its own (outside every pool) that LISTENs for the NOTIFY an enqueue sends at commit, so
 * an idle dispatcher starts at once instead of at its next poll. Polling stays the safety net: while the listener
 * cannot connect or LISTEN (a hot standby answers "cannot execute LISTEN during recovery"), it tries again with a
 * capped exponential backoff, each failed connection ended before the next is made. Behind a transaction pooler it
 * listens on `database.listenUrl`, and without one not at all (see ConnectionPlan.listen).
 */
@Injectable()
export class WakeUpListener {
  private readonly logger = new Logger('ReliableMail');
  private client: pg.Client | null = null;
  private onWakeUp: ((lane: string) => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = true;
  private current: WakeUpState = { listening: false, since: new Date(), failures: 0, lastError: null };
  /** It said it cannot listen, and has not listened since: it says so when it does. */
  private warned = false;

  constructor(private readonly database: OutboxDatabase) {}

  get state(): WakeUpState {
    return { ...this.current };
  }

  /** Starts listening; a failure is retried in the background, so start-up never waits for the database. */
  start(onWakeUp: (lane: string) => void): void {
    this.onWakeUp = onWakeUp;
    this.stopped = false;
    if (this.database.plan.listen === null) {
      this.current = { listening: false, since: new Date(), failures: 0, lastError: POLLING_ONLY };
      this.logger.log({
        msg:
          'dispatchers wake up by polling (dispatcher.pollIntervalMs) only: no LISTEN through a transaction pooler ' +
          "(database.pooler 'transaction'); database.listenUrl, a connection to PostgreSQL itself, would take one",
      });
      return;
    }
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.clearTimer();
    if (this.client) end(this.client);
    this.client = null;
  }

  private async connect(): Promise<void> {
    this.timer = null;
    if (this.stopped) return;
    let client: pg.Client | null = null;
    try {
      client = this.database.listenClient();
      client.on('notification', (message) => {
        if (message.channel === WAKE_UP_CHANNEL) this.onWakeUp?.(message.payload ?? '');
      });
      const connected = client;
      client.on('error', (error) => this.lost(connected, error));
      client.on('end', () => this.lost(connected, new Error('the connection ended')));
      await client.connect();
      await client.query(LISTEN);
      if (this.stopped) return end(client);
      this.client = client;
      this.current = { listening: true, since: new Date(), failures: 0, lastError: null };
      if (this.warned) this.logger.log({ msg: 'wake-up listener listens again' });
      this.warned = false;
      this.schedule(HEARTBEAT_MS, () => this.heartbeat(connected));
    } catch (error) {
      if (client) end(client);
      this.failed(error);
    }
  }

  private async heartbeat(client: pg.Client): Promise<void> {
    try {
      await client.query('select 1');
      if (this.client === client) this.schedule(HEARTBEAT_MS, () => this.heartbeat(client));
    } catch (error) {
      this.lost(client, error);
    }
  }

  /** The listening connection failed: only the current one counts, so a stale error never disturbs its successor. */
  private lost(client: pg.Client, error: unknown): void {
    if (this.client !== client) return;
    this.client = null;
    end(client);
    this.clearTimer();
    this.failed(error);
  }

  private failed(error: unknown): void {
    const failures = this.current.failures + 1;
    const since = this.current.listening || failures === 1 ? new Date() : this.current.since;
    this.current = { listening: false, since, failures, lastError: String(error) };
    const delay = Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** (failures - 1));
    // Said once, not at every retry; not at all while the database's own outage, already logged, explains it.
    if (!this.warned && failures >= FAILURES_BEFORE_OWN_LINE && this.database.availability.unavailableSince === null) {
      this.logger.warn({
        msg: 'wake-up listener cannot listen; the dispatchers poll until it is back',
        failures,
        retryInMs: delay,
        error: String(error),
      });
      this.warned = true;
    }
    if (!this.stopped) this.schedule(delay, () => this.connect());
  }

  private schedule(delayMs: number, work: () => Promise<void>): void {
    this.clearTimer();
    this.timer = setTimeout(() => void work(), delayMs);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * Ends a connection without waiting for it: a polite end() on a half-open socket would wait forever, so the
 * socket is destroyed as well once the goodbye was written.
 */
function end(client: pg.Client): void {
  client.removeAllListeners('end');
  client.end().catch(() => undefined);
  const socket = (client as unknown as { connection?: { stream?: Socket } }).connection?.stream;
  setImmediate(() => socket?.destroy());
}
