import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Body, Controller, Get, type INestApplication, Param, Post } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import {
  MailOutboxService,
  ReliableMailErrorFilter,
  ReliableMailModule,
  TransactionRequiredError,
} from '@reliable-mail/nestjs';
import { listenLocally, postJson } from './support/http-client.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { migrate, ormConfig, testMailOptions, testLogger } from './support/test-app.js';

@Controller()
class SignupController {
  constructor(private readonly outbox: MailOutboxService) {}

  @Post('signup')
  async signup(@Body() body: { email: string; name: string }) {
    const { id } = await this.outbox.enqueue(
      { to: body.email, subject: `Welcome ${body.name}`, text: 'Hello' },
      { idempotencyKey: `signup:${body.email}` },
    );
    return { id };
  }

  @Get('mails/:id')
  async mail(@Param('id') id: string) {
    return this.outbox.get(id);
  }

  @Post('broken')
  broken(): never {
    throw new TransactionRequiredError();
  }
}

describe.each(['express', 'fastify'] as const)('ReliableMailErrorFilter on %s', (http) => {
  let database: TestDatabase;
  let app: INestApplication;
  let base: string;

  const post = (path: string, body: unknown) => postJson(base, path, body);

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    const moduleRef = await Test.createTestingModule({
      imports: [
        MikroOrmModule.forRoot(ormConfig(database.url)),
        EventEmitterModule.forRoot(),
        ReliableMailModule.forRoot(testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false } })),
      ],
      controllers: [SignupController],
      providers: [{ provide: APP_FILTER, useClass: ReliableMailErrorFilter }],
    }).compile();
    app =
      http === 'fastify'
        ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: testLogger })
        : moduleRef.createNestApplication({ logger: testLogger });
    base = await listenLocally(app);
  });

  afterAll(async () => {
    await app?.close();
    await database?.drop();
  });

  it('answers 400 with the field and the reason for an invalid address', async () => {
    const response = await post('/signup', { email: 'not an address', name: 'Ann' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      statusCode: 400,
      error: 'MailValidationError',
      field: 'to',
      message: expect.stringContaining('Invalid mail: to'),
    });
  });

  it('answers 409 naming the existing row for an idempotency key reused with other content', async () => {
    const first = await post('/signup', { email: 'ann@example.com', name: 'Ann' });
    expect(first.status).toBe(201);
    const { id } = (await first.json()) as { id: string };
    const again = await post('/signup', { email: 'ann@example.com', name: 'Annie' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ statusCode: 409, error: 'IdempotencyConflictError', existingId: id });
  });

  it('answers 404 for an unknown row', async () => {
    const response = await fetch(`${base}/mails/0190a000-0000-7000-8000-000000000000`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ statusCode: 404, error: 'OutboxRowNotFoundError' });
  });

  it("answers 500 without the library's message for the server's own fault", async () => {
    const response = await post('/broken', {});
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({
      statusCode: 500,
      error: 'Internal Server Error',
      message: 'Internal server error',
    });
  });
});
