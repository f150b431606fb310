// npm run bench:webhooks: how fast the webhook route stores delivery feedback, and that parallel posts lose
// nothing. One process: a Nest app with ReliableMailWebhooksModule (Resend, Svix signatures) on a database of its
// own, and the client posting BENCH_WEBHOOK_POSTS signed events at once; then the same events again, as a
// provider redelivers them. Needs PostgreSQL at BENCH_PG_URL (a role that can create databases).
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { MikroORM } from '@mikro-orm/postgresql';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import {
  EMAIL_BOUNCED_EVENT,
  EMAIL_DELIVERED_EVENT,
  ReliableMailModule,
  ReliableMailWebhooksModule,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { Webhook } from 'svix';
import { databaseUrl, FROM, MESSAGE_ID_DOMAIN, percentile, settings, sleep } from './common.js';
import { ormConfig } from './reliable-mail-config.js';

const POSTS = Number(process.env.BENCH_WEBHOOK_POSTS ?? 1_000);
/** Rows the events are about; every tenth event is a hard bounce (a suppression besides the feedback). */
const ROWS = 100;
const SECRET = `whsec_${Buffer.from('reliable-mail webhook benchmark').toString('base64')}`;

@Injectable()
class EventCounter {
  heard = 0;

  @OnEvent(EMAIL_DELIVERED_EVENT)
  @OnEvent(EMAIL_BOUNCED_EVENT)
  onFeedback(): void {
    this.heard++;
  }
}

function appModule(url: string) {
  @Module({
    imports: [
      MikroOrmModule.forRoot(ormConfig(url)),
      EventEmitterModule.forRoot(),
      ReliableMailModule.forRoot({
        transport: 'smtp://127.0.0.1:1',
        from: FROM,
        messageIdDomain: MESSAGE_ID_DOMAIN,
        dispatcher: { enabled: false },
        retention: { enabled: false },
        isGlobal: true,
      }),
      ReliableMailWebhooksModule.forRoot({ sources: { resend: { secret: SECRET } } }),
    ],
    providers: [EventCounter],
  })
  class WebhookBenchModule {}
  return WebhookBenchModule;
}

/** Signed Resend events about the rows whose provider ids are `resend-0` … `resend-<ROWS - 1>`. */
function signedEvents(count: number) {
  const webhook = new Webhook(SECRET);
  return Array.from({ length: count }, (_, index) => {
    const row = index % ROWS;
    const bounced = index % 10 === 9;
    const body = JSON.stringify({
      type: bounced ? 'email.bounced' : 'email.delivered',
      created_at: new Date().toISOString(),
      data: {
        email_id: `resend-${row}`,
        to: [bounced ? `gone-${index}@example.org` : `customer-${row}@example.org`],
        ...(bounced ? { bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 no such user' } } : {}),
      },
    });
    const id = `msg_${randomUUID()}`;
    const at = new Date();
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'svix-id': id,
        'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
        'svix-signature': webhook.sign(id, at, body),
      },
    };
  });
}

async function postAll(url: string, events: ReturnType<typeof signedEvents>) {
  const started = performance.now();
  const latencies: number[] = [];
  const results = await Promise.all(
    events.map(async ({ body, headers }) => {
      const sent = performance.now();
      const response = await fetch(url, { method: 'POST', headers, body });
      const result = (await response.json()) as { stored: number };
      latencies.push(performance.now() - sent);
      if (response.status !== 200) throw new Error(`answered ${response.status}: ${JSON.stringify(result)}`);
      return result.stored;
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    posts: events.length,
    seconds,
    perSecond: events.length / seconds,
    p50: percentile(latencies, 50)!,
    p95: percentile(latencies, 95)!,
    stored: results.reduce((sum, stored) => sum + stored, 0),
  };
}

async function main(): Promise<void> {
  const name = `bench_webhooks_${process.pid}`;
  const admin = new pg.Client({ connectionString: settings.pgUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = databaseUrl(name);
  try {
    const orm = await MikroORM.init(ormConfig(url));
    await orm.migrator.up();
    await orm.em.getConnection().execute(
      `insert into reliable_mail.mail_outbox (id, message_id, status, payload, max_attempts, provider_message_id, sent_at, accepted_recipients)
       select id, '<' || id || '@${MESSAGE_ID_DOMAIN}>', 'sent', '{"v":2}', 8, 'resend-' || i, now(),
              jsonb_build_array('customer-' || i || '@example.org')
       from (select gen_random_uuid() as id, i from generate_series(0, ${ROWS - 1}) i) rows`,
    );
    await orm.close();

    const app = await NestFactory.create(appModule(url), { rawBody: true, logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    const route = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/webhooks/mail/resend`;
    const events = signedEvents(POSTS);
    await postAll(route, signedEvents(20)); // warm-up: connections, prepared statements, the JIT
    const first = await postAll(route, events);
    const again = await postAll(route, events);
    const counter = app.get(EventCounter);
    const deadline = Date.now() + 30_000;
    while (counter.heard < POSTS + 20 && Date.now() < deadline) await sleep(20);
    await app.close();

    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const [{ rows, unlinked }] = (
      await check.query(`select count(*)::int as rows, count(*) filter (where outbox_id is null)::int as unlinked
                         from reliable_mail.mail_outbox_feedback`)
    ).rows as Array<{ rows: number; unlinked: number }>;
    await check.end();

    const line = (label: string, figure: Awaited<ReturnType<typeof postAll>>) =>
      `${label.padEnd(22)} ${String(figure.posts).padStart(5)} posts in ${figure.seconds.toFixed(2)} s = ` +
      `${Math.round(figure.perSecond)} posts/s (p50 ${figure.p50.toFixed(0)} ms, p95 ${figure.p95.toFixed(0)} ms), ` +
      `${figure.stored} stored`;
    console.log(line('new events, parallel', first));
    console.log(line('the same again', again));
    console.log(
      `feedback rows: ${rows} (expected ${POSTS + 20}), unlinked: ${unlinked}, events heard: ${counter.heard}`,
    );
    if (rows !== POSTS + 20 || first.stored !== POSTS || again.stored !== 0 || unlinked !== 0) {
      throw new Error('feedback lost or stored twice');
    }
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

await main();
