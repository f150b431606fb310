import { expect, it } from '@jest/globals';
import { describeStack, outboxRows, type StackSession } from '../support/stacks/stack-cases.js';
import { GeneratedPrisma, PRISMA_TRANSACTION_OPTIONS, type PrismaClientLike } from '../support/stacks/prisma.js';

// The client is generated in beforeAll from test/stacks/prisma/schema.prisma. Prisma's migrate cannot run here (it
// needs the native schema engine, which cannot be downloaded), so the `orders` table its model maps is created with
// SQL by the shared cases, as the other stacks' is.
const prisma = new GeneratedPrisma();
const INTERACTIVE = 'an interactive $transaction()';

let client: PrismaClientLike;

describeStack({
  stack: 'Prisma (@prisma/adapter-pg)',
  styles: [INTERACTIVE],
  outsideWays: ['no tx', 'the root PrismaClient as tx'],
  prepare: () => prisma.generate(),
  dispose: () => prisma.dispose(),
  async open(_app, databaseUrl): Promise<StackSession> {
    client = prisma.client(databaseUrl);
    return {
      transaction: (_style, work) =>
        client.$transaction(
          (tx) => work({ target: { tx }, execute: (sql) => tx.$executeRawUnsafe(sql) }),
          PRISMA_TRANSACTION_OPTIONS,
        ),
      outside: (way, work) => work(way === 'no tx' ? {} : { tx: client }),
      close: () => client.$disconnect(),
    };
  },
  extraCases(fixture) {
    it("keeps sendAt exact in a transaction whose session TimeZone is not UTC, beside an order of Prisma's model", async () => {
      const { outbox, database, db } = fixture();
      const newYork = prisma.client(database.url, '-c TimeZone=America/New_York');
      const sendAt = new Date(Date.now() + 3_600_000);
      try {
        const result = await newYork.$transaction(async (tx) => {
          await tx.order.create({ data: { customer: 'prisma-time-zone' } });
          return outbox.enqueue(
            { to: 'tz@example.com', subject: 'Later', text: 'x' },
            { tx, sendAt, metadata: { case: 'prisma-time-zone' } },
          );
        });
        expect(await outboxRows(fixture(), 'prisma-time-zone')).toEqual([result.id]);
        const { rows } = await db.query<{ at: Date }>(
          'select next_attempt_at as at from reliable_mail.mail_outbox where id = $1',
          [result.id],
        );
        expect(rows[0].at.toISOString()).toBe(sendAt.toISOString());
        await outbox.cancel(result.id);
      } finally {
        await newYork.$disconnect();
      }
    });
  },
});
