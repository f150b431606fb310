import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { EntityManager } from '@mikro-orm/postgresql';
import { connect as connectRabbitMq } from 'amqplib';
import {
  EMAIL_SENT_EVENT,
  MailOutboxService,
  NatsJetStreamDestination,
  RabbitMqDestination,
} from '@reliable-mail/nestjs';
import { PrivateNats, PrivateRabbitMq } from '../support/private-brokers.js';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { createTestApp, migrate, testMailOptions, waitFor } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const MAILS = 1_000;
const STREAM = 'RELIABLE_MAIL';
const QUEUE = 'relay-test';
/** JetStream's duplicate window, in nanoseconds: longer than the test, so a second publication of one is dropped. */
const TEN_MINUTES_NS = 600_000_000_000;

interface RelayedMessage {
  messageId: string;
  eventId: string;
  name: string;
  mailId: string;
}

// The test: every event of 1,000 mails reaches a consumer of each broker, none twice after deduplication,
// through a restart of both brokers in the middle. Each broker is one of this test's own
// (test/support/private-brokers): the shared ones on 4222 and 5672 are never restarted.
describe('the event relay to NATS JetStream and RabbitMQ', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let nats: PrivateNats;
  let rabbitMq: PrivateRabbitMq;
  let app: Awaited<ReturnType<typeof createTestApp>> | undefined;

  beforeAll(async () => {
    [database, smtp, nats, rabbitMq] = await Promise.all([
      createTestDatabase(),
      (async () => {
        const server = new SmtpTestServer();
        await server.listen();
        return server;
      })(),
      PrivateNats.start(),
      PrivateRabbitMq.start(),
    ]);
    await migrate(database.url);
    const natsConnection = await connectNats({ servers: nats.url });
    const manager = await jetstreamManager(natsConnection);
    await manager.streams.add({
      name: STREAM,
      subjects: ['reliable-mail.email.>'],
      duplicate_window: TEN_MINUTES_NS,
    });
    await natsConnection.close();
    const rabbit = await connectRabbitMq(rabbitMq.url);
    const channel = await rabbit.createChannel();
    await channel.assertExchange('reliable-mail', 'topic', { durable: true });
    await channel.assertQueue(QUEUE, { durable: true });
    await channel.bindQueue(QUEUE, 'reliable-mail', 'reliable-mail.email.#');
    await rabbit.close();
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await Promise.all([smtp?.close(), nats?.close(), rabbitMq?.close()]);
    await database?.drop();
  });

  const streamMessages = async (): Promise<number> => {
    const connection = await connectNats({ servers: nats.url, reconnect: false });
    try {
      return (await (await jetstreamManager(connection)).streams.info(STREAM)).state.messages;
    } finally {
      await connection.close();
    }
  };

  /** Every message of the stream, read by an ordered consumer. */
  const readStream = async (): Promise<RelayedMessage[]> => {
    const connection = await connectNats({ servers: nats.url });
    try {
      const consumer = await jetstream(connection).consumers.get(STREAM);
      const total = await streamMessages();
      const read: RelayedMessage[] = [];
      while (read.length < total) {
        const batch = await consumer.fetch({ max_messages: 500, expires: 2_000 });
        for await (const message of batch) {
          read.push({ ...message.json<RelayedMessage>(), messageId: message.headers?.get('Nats-Msg-Id') ?? '' });
        }
      }
      return read;
    } finally {
      await connection.close();
    }
  };

  /** Every message of the queue, taken one by one until it is empty. */
  const drainQueue = async (): Promise<Array<RelayedMessage & { amqpMessageId: string }>> => {
    const rabbit = await connectRabbitMq(rabbitMq.url);
    try {
      const channel = await rabbit.createChannel();
      const read: Array<RelayedMessage & { amqpMessageId: string }> = [];
      for (;;) {
        const message = await channel.get(QUEUE, { noAck: true });
        if (!message) return read;
        read.push({
          ...(JSON.parse(message.content.toString()) as RelayedMessage),
          amqpMessageId: message.properties.messageId as string,
        });
      }
    } finally {
      await rabbit.close();
    }
  };

  it('every sent event of 1,000 mails reaches both, none twice after deduplication, through a restart of both', async () => {
    app = await createTestApp(
      database.url,
      testMailOptions(smtp.url, {
        relay: {
          destinations: [
            new NatsJetStreamDestination({ servers: nats.url, connectTimeoutMs: 2_000, ackTimeoutMs: 2_000 }),
            new RabbitMqDestination({ url: rabbitMq.url, connectTimeoutMs: 2_000 }),
          ],
          pollIntervalMs: 100,
          publishTimeoutMs: 3_000,
        },
      }),
      [],
      { eventRecorder: false },
    );
    const outbox = app.get(MailOutboxService);
    const ids = new Set<string>();
    for (let start = 0; start < MAILS; start += 100) {
      const batch = Array.from({ length: 100 }, (_, i) => ({
        mail: { to: `r${start + i}@example.com`, subject: 'Hi', text: 'x' },
      }));
      for (const { id } of await outbox.enqueueMany(batch)) ids.add(id);
    }

    const em = app.get(EntityManager);
    const unpublished = async () => {
      const [{ sent, owed }] = await em.execute<Array<{ sent: number; owed: number }>>(
        `select (select count(*) from mail_outbox where status = 'sent')::int as sent,
                (select count(*) from mail_relay)::int as owed`,
      );
      return { sent, owed };
    };
    await waitFor('a third of the events in the stream', async () => (await streamMessages()) >= MAILS / 3, 60_000);
    const atRestart = await unpublished();
    await Promise.all([nats.restart('kill'), rabbitMq.restart('kill')]);
    // In the middle: events were still owed to a broker, or mails still to be sent, when both went down.
    expect(atRestart.owed + (MAILS - atRestart.sent)).toBeGreaterThan(0);

    await waitFor(
      'every mail sent and every event confirmed by both brokers',
      async () => {
        const { sent, owed } = await unpublished();
        return sent === MAILS && owed === 0;
      },
      180_000,
    ).catch(async (error: unknown) => {
      // What was left, for the report: the mails not sent, the events each broker is owed and why.
      const left = await em.execute(
        `select destination, count(*)::int as owed, max(attempts) as attempts, max(last_error) as error
         from mail_relay group by destination`,
      );
      throw new Error(`${String(error)}; ${JSON.stringify({ ...(await unpublished()), left })}`);
    });

    const streamed = await readStream();
    // JetStream dropped every second publication of an event (same Nats-Msg-Id within its window).
    expect(streamed).toHaveLength(MAILS);
    expect(new Set(streamed.map((message) => message.mailId))).toEqual(ids);
    for (const message of streamed) {
      expect(message).toMatchObject({ name: EMAIL_SENT_EVENT, messageId: `${message.mailId}:${message.eventId}` });
    }

    // RabbitMQ keeps what it was given twice (a publication whose confirmation the restart cut off): its consumer
    // deduplicates on messageId, and then has each event once.
    const queued = await drainQueue();
    const unique = new Map(queued.map((message) => [message.amqpMessageId, message]));
    expect(unique.size).toBe(MAILS);
    expect(new Set([...unique.values()].map((message) => message.mailId))).toEqual(ids);
    for (const [messageId, message] of unique) expect(messageId).toBe(`${message.mailId}:${message.eventId}`);
    // The same event has the same id in both brokers.
    expect(new Set(unique.keys())).toEqual(new Set(streamed.map((message) => message.messageId)));
    console.log(
      `relay through a restart of both brokers (${atRestart.sent} sent and ${atRestart.owed} events owed then): ` +
        `${MAILS} events; JetStream stored ${streamed.length}, ` +
        `RabbitMQ queued ${queued.length} (${queued.length - unique.size} second copies, deduplicated by the consumer)`,
    );
  }, 300_000);
});
