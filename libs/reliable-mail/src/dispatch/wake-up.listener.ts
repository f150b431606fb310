import { Injectable, Logger } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { OutboxDatabase } from '../database/outbox-database.js';
import { LISTEN } from '../outbox/sql/notify.js';
import { WAKE_UP_CHANNEL } from '../reliable-mail.constants.js';

/**
 * Holds one connection that LISTENs for the NOTIFY an enqueue sends at commit, so an idle dispatcher starts at once
 * instead of at its next poll. Polling stays the safety net: a lost connection only costs latency until it is back.
 */
@Injectable()
export class WakeUpListener {
  private readonly logger = new Logger('ReliableMail');
  private client: PoolClient | null = null;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(private readonly database: OutboxDatabase) {}

  async start(onWakeUp: (lane: string) => void): Promise<void> {
    this.stopped = false;
    try {
      const pool = await this.database.pool();
      const client = await pool.connect();
      client.on('notification', (message) => {
        if (message.channel === WAKE_UP_CHANNEL) onWakeUp(message.payload ?? '');
      });
      client.on('error', (error) => this.reconnect(onWakeUp, error));
      await client.query(LISTEN.text);
      this.client = client;
      if (this.stopped) await this.stop();
    } catch (error) {
      this.reconnect(onWakeUp, error);
    }
  }

  private reconnect(onWakeUp: (lane: string) => void, error: unknown): void {
    this.logger.warn({ msg: 'wake-up listener lost its connection; polling until it is back', error: String(error) });
    this.client?.release(true);
    this.client = null;
    if (!this.stopped && !this.reconnectTimer) {
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = null;
        void this.start(onWakeUp);
      }, 1_000);
      this.reconnectTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    // Destroyed rather than returned to the pool, which would otherwise hand out a connection still listening.
    this.client?.release(true);
    this.client = null;
  }
}
