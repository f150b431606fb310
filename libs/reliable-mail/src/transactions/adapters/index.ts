import type { TransactionAdapter } from '../caller-transaction.js';
import { drizzleAdapter } from './drizzle.js';
import { kyselyAdapter } from './kysely.js';
import { mikroOrmAdapter } from './mikro-orm.js';
import { pgAdapter } from './pg.js';
import { prismaAdapter } from './prisma.js';
import { typeOrmAdapter } from './typeorm.js';

/** The clients reliable-mail writes through, the most specific first: a pg client is anything with `query()`. */
export const TRANSACTION_ADAPTERS: readonly TransactionAdapter[] = [
  mikroOrmAdapter,
  typeOrmAdapter,
  prismaAdapter,
  drizzleAdapter,
  kyselyAdapter,
  pgAdapter,
];

export { isPgPool } from './pg.js';
