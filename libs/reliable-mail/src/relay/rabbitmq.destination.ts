import type { ChannelModel, ConfirmChannel } from 'amqplib';
import { loadSdk } from '../shared/optional-package.js';
import { LazyConnection } from './lazy-connection.js';
import type { RelayDestination, RelayedEvent } from './relay-destination.interface.js';
import { relayMessageBody } from './relay-message.js';

export interface RabbitMqDestinationOptions {
  /** The destination's name (see `RelayDestination.name`). @default 'rabbitmq' */
  name?: string;
  /** `amqp://user:pass@host:5672/vhost` (or `amqps://`). */
  url: string;
  /** The exchange events are published to, with the event's name as routing key. @default 'reliable-mail' */
  exchange?: string;
  /**
   * Declare the exchange (topic, durable) at each connection. Set false where the app's own tooling declares it:
   * then it must exist.
   * @default true
   */
  assertExchange?: boolean;
  /** The events it takes. @default every event of reliable-mail's */
  events?: string[];
  /** How long one connection attempt may take. @default 5000 */
  connectTimeoutMs?: number;
}

interface Connected {
  model: ChannelModel;
  channel: ConfirmChannel;
  /** Message ids the broker returned as unroutable, until their confirmation comes (a return precedes its ack). */
  returned: Set<string>;
}

/**
 * Publishes events to a RabbitMQ exchange on a confirm channel: persistent, mandatory, with the event's message id as
 * `messageId`. An event counts as published once the broker confirms it; one the broker returns, since no queue is
 * bound for it, does not, and is published again later, so that a consumer not yet set up loses nothing. RabbitMQ
 * does not deduplicate: a consumer must, on `messageId` (see docs/events.md "Relay to a broker").
 *
 * Connects at the first publication; a connection or channel that closes (a broker restart) is made again at the
 * next one.
 */
export class RabbitMqDestination implements RelayDestination {
  readonly name: string;
  readonly events?: readonly string[];
  private readonly exchange: string;
  private amqp: typeof import('amqplib') | null = null;
  private readonly broker: LazyConnection<Connected>;

  constructor(private readonly options: RabbitMqDestinationOptions) {
    this.name = options.name ?? 'rabbitmq';
    this.events = options.events;
    this.exchange = options.exchange ?? 'reliable-mail';
    this.broker = new LazyConnection<Connected>(
      (ended) => this.connect(ended),
      ({ model }) => model.close(),
      // The socket's connect and AMQP's handshake (and the exchange's declaration) together.
      this.connectTimeoutMs,
    );
  }

  private get connectTimeoutMs(): number {
    return this.options.connectTimeoutMs ?? 5_000;
  }

  async open(): Promise<void> {
    this.amqp = await loadSdk('amqplib', 'RabbitMqDestination', () => import('amqplib'));
  }

  async publish(event: RelayedEvent): Promise<void> {
    const { channel, returned } = await this.broker.get();
    await new Promise<void>((resolve, reject) => {
      channel.publish(
        this.exchange,
        event.name,
        relayMessageBody(event),
        {
          messageId: event.messageId,
          type: event.name,
          contentType: 'application/json',
          timestamp: Math.floor(event.recordedAt.getTime() / 1000),
          persistent: true,
          mandatory: true,
        },
        (error: unknown) => {
          if (error) reject(error instanceof Error ? error : new Error('the broker refused the message'));
          else if (returned.delete(event.messageId)) {
            reject(new Error(`no queue is bound to exchange ${this.exchange} for ${event.name}`));
          } else resolve();
        },
      );
    });
  }

  close(): Promise<void> {
    return this.broker.close();
  }

  private async connect(ended: () => void): Promise<Connected> {
    if (!this.amqp) throw new Error(`relay destination ${this.name} was not opened`);
    const model = await this.amqp.connect(this.options.url, { timeout: this.connectTimeoutMs });
    // An 'error' nobody listens for would throw out of the process; each is followed by 'close'.
    model.on('error', () => undefined);
    model.on('close', ended);
    try {
      const channel = await model.createConfirmChannel();
      channel.on('error', () => undefined);
      // A channel the broker closed (it refused something) takes its connection with it: the next use makes both.
      channel.on('close', () => {
        ended();
        void model.close().catch(() => undefined);
      });
      const returned = new Set<string>();
      channel.on('return', (message: { properties: { messageId?: string } }) => {
        if (message.properties.messageId) returned.add(message.properties.messageId);
      });
      if (this.options.assertExchange ?? true) {
        await channel.assertExchange(this.exchange, 'topic', { durable: true });
      }
      return { model, channel, returned };
    } catch (error) {
      await model.close().catch(() => undefined);
      throw error;
    }
  }
}
