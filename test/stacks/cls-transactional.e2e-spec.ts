import { type DynamicModule, Injectable, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type EntityManager } from 'typeorm';
import {
  describeStack,
  type StackDriver,
  type StackSession,
  type TestApp,
  type TransactionWork,
} from '../support/stacks/stack-cases.js';
import {
  GeneratedPrisma,
  PRISMA_TRANSACTION_OPTIONS,
  type PrismaClientLike,
  type PrismaTransactionClient,
} from '../support/stacks/prisma.js';

// No tx is given to the outbox here: it finds the transaction through @nestjs-cls/transactional's TransactionHost of
// the app's default connection, TypeORM in one app and Prisma in the other. Prisma's client is generated in beforeAll;
// its migrate cannot run here (no native schema engine), so `orders` is created with SQL by the shared cases.

// Imported once the file's static imports ran: these packages are CommonJS and require @nestjs/common, an ES module,
// which jest's runtime refuses while that module is still being linked ("Cannot require() ES Module … in a cycle").
const { ClsPluginTransactional, TransactionHost, Transactional } = await import('@nestjs-cls/transactional');
const { TransactionalAdapterPrisma } = await import('@nestjs-cls/transactional-adapter-prisma');
const { TransactionalAdapterTypeOrm } = await import('@nestjs-cls/transactional-adapter-typeorm');
const { ClsModule } = await import('nestjs-cls');

const DECORATOR = '@Transactional()';
const WITH_TRANSACTION = 'txHost.withTransaction()';
const PRISMA = Symbol('PrismaClient');

/** An app's service whose method runs in the ambient transaction the decorator opens. */
@Injectable()
class OrderService {
  @Transactional()
  async inTransaction<T>(work: () => Promise<T>): Promise<T> {
    return work();
  }
}

@Module({})
class PrismaModule {}

/** A stack whose transactions the app runs through TransactionHost; `execute` runs the app's SQL on `txHost.tx`. */
function clsDriver(
  stack: string,
  imports: (databaseUrl: string) => DynamicModule[],
  execute: (tx: unknown, sql: string) => Promise<unknown>,
  more: Pick<StackDriver, 'prepare' | 'dispose'> & { close?(app: TestApp): Promise<void> } = {},
): StackDriver {
  return {
    stack: `${stack} through @nestjs-cls/transactional`,
    styles: [DECORATOR, WITH_TRANSACTION],
    outsideWays: ['no tx', 'txHost.tx outside a transaction (the root client), as tx'],
    providers: [OrderService],
    imports,
    prepare: more.prepare,
    dispose: more.dispose,
    async open(app): Promise<StackSession> {
      const host = app.get(TransactionHost);
      const service = app.get(OrderService);
      const run = <T>(work: TransactionWork<T>) => work({ target: {}, execute: (sql) => execute(host.tx, sql) });
      return {
        transaction: (style, work) =>
          style === DECORATOR ? service.inTransaction(() => run(work)) : host.withTransaction(() => run(work)),
        outside: (way, work) => work(way === 'no tx' ? {} : { tx: host.tx }),
        close: async () => more.close?.(app),
      };
    },
  };
}

describeStack(
  clsDriver(
    'TypeORM',
    (url) => [
      TypeOrmModule.forRoot({ type: 'postgres', url, entities: [], synchronize: false }),
      ClsModule.forRoot({
        global: true,
        plugins: [
          new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) }),
        ],
      }),
    ],
    (tx, sql) => (tx as EntityManager).query(sql),
  ),
);

const prisma = new GeneratedPrisma();

describeStack(
  clsDriver(
    'Prisma',
    (url) => {
      const prismaModule: DynamicModule = {
        module: PrismaModule,
        global: true,
        providers: [{ provide: PRISMA, useFactory: () => prisma.client(url) }],
        exports: [PRISMA],
      };
      return [
        prismaModule,
        ClsModule.forRoot({
          global: true,
          plugins: [
            new ClsPluginTransactional({
              imports: [prismaModule],
              adapter: new TransactionalAdapterPrisma<PrismaClientLike>({
                prismaInjectionToken: PRISMA,
                sqlFlavor: 'postgresql',
                defaultTxOptions: PRISMA_TRANSACTION_OPTIONS,
              }),
            }),
          ],
        }),
      ];
    },
    (tx, sql) => (tx as PrismaTransactionClient).$executeRawUnsafe(sql),
    {
      prepare: () => prisma.generate(),
      dispose: () => prisma.dispose(),
      close: (app) => app.get<PrismaClientLike>(PRISMA).$disconnect(),
    },
  ),
);
