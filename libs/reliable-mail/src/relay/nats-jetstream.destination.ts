import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import { loadSdk } from '../shared/optional-package.js';
import { LazyConnection } from './lazy-connection.js';
import type { RelayDestination, RelayedEvent } from './relay-destination.interface.js';
import { relayMessageBody } from './relay-message.js';

export interface NatsJetStreamDestinationOptions {
  /** The destination's name (see `RelayDestination.name`). @default 'nats' */
  name?: string;
  servers: string | string[];
  /**
   * Put before each event's name to make its subject; the stream that keeps them must capture those subjects (with
   * no prefix, `reliable-mail.email.>`).
   * @default none: the subject is the event's name, `reliable-mail.email.sent` and the others
   */
  subjectPrefix?: string;
  /** The events it takes. @default every event of reliable-mail's */
  events?: string[];
  /**
   * The rest of the connection's options, as `@nats-io/transport-node`'s `connect` takes them (user and pass, token,
   * tls, authenticator…). Typed loosely: the package is an optional peer, and an app without it must still compile
   * these declarations.
   */
  connection?: Record<string, unknown>;
  /** How long one connection attempt may take. @default 5000 */
  connectTimeoutMs?: number;
  /** How long JetStream may take to acknowledge one event. @default 5000 */
  ackTimeoutMs?: number;
}

interface Connected {
  connection: NatsConnection;
  jetStream: JetStreamClient;
}

type NatsPackages = [typeof import('@nats-io/transport-node'), typeof import('@nats-io/jetstream')];

/**
 * Publishes events to NATS JetStream, each with its message id as `Nats-Msg-Id`: the stream deduplicates a second
 * publication of one (the relay's at-least-once) within its duplicate window (2 minutes by default; set it longer
 * than a broker outage you want no duplicate after). An event counts as published once the stream's ack says it is
 * stored. The subject is the event's name; the stream is the app's to create.
 *
 * Connects at the first publication and keeps the connection, which reconnects by itself after a server restart;
 * a connection that ends is made again at the next publication.
 */
export class NatsJetStreamDestination implements RelayDestination {
  readonly name: string;
  readonly events?: readonly string[];
  private packages: NatsPackages | null = null;
  private readonly broker: LazyConnection<Connected>;

  constructor(private readonly options: NatsJetStreamDestinationOptions) {
    this.name = options.name ?? 'nats';
    this.events = options.events;
    this.broker = new LazyConnection<Connected>(
      (ended) => this.connect(ended),
      // At once: every publication was acknowledged or given up on by then, so nothing is left to drain, and a drain
      // would wait for a server that may be the one that is down.
      ({ connection }) => connection.close(),
      this.connectTimeoutMs,
    );
  }

  private get connectTimeoutMs(): number {
    return this.options.connectTimeoutMs ?? 5_000;
  }

  async open(): Promise<void> {
    this.packages = await Promise.all([
      loadSdk('@nats-io/transport-node', 'NatsJetStreamDestination', () => import('@nats-io/transport-node')),
      loadSdk('@nats-io/jetstream', 'NatsJetStreamDestination', () => import('@nats-io/jetstream')),
    ]);
  }

  async publish(event: RelayedEvent): Promise<void> {
    const { jetStream } = await this.broker.get();
    const subject = this.options.subjectPrefix ? `${this.options.subjectPrefix}.${event.name}` : event.name;
    await jetStream.publish(subject, relayMessageBody(event), {
      msgID: event.messageId,
      timeout: this.options.ackTimeoutMs ?? 5_000,
    });
  }

  close(): Promise<void> {
    return this.broker.close();
  }

  private async connect(ended: () => void): Promise<Connected> {
    if (!this.packages) throw new Error(`relay destination ${this.name} was not opened`);
    const [transport, jetstream] = this.packages;
    const connection = await transport.connect({
      name: 'reliable-mail',
      ...(this.options.connection as NodeConnectionOptions | undefined),
      servers: this.options.servers,
      timeout: this.connectTimeoutMs,
      // Reconnects for as long as the server is away; publications meanwhile fail at their ack timeout.
      maxReconnectAttempts: -1,
    });
    void connection.closed().then(ended);
    return { connection, jetStream: jetstream.jetstream(connection) };
  }
}
