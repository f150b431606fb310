import { isFunction, rowsOf, type TransactionAdapter } from '../caller-transaction.js';

interface PrismaRawClient {
  $queryRawUnsafe<R>(text: string, ...values: unknown[]): Promise<R[]>;
}

/**
 * Prisma's interactive transaction client (`prisma.$transaction(async (tx) => …)`), on a PostgreSQL driver
 * adapter. An array parameter is cast in the statement's text (Prisma sends an uncast one as text), dates go as ISO
 * text (see statementsIn), a void column is cast to text; an int8 comes back as a BigInt, and reliable-mail reads
 * none from a caller's transaction.
 */
export const prismaAdapter: TransactionAdapter = {
  recognises: (tx) => isFunction(tx, '$queryRawUnsafe'),
  open(tx) {
    // The root client (extended or not) can connect and disconnect; a transaction's client can do neither.
    if (isFunction(tx, '$connect') || isFunction(tx, '$disconnect')) return null;
    const prisma = tx as PrismaRawClient;
    return {
      query: async <R>(text: string, values: readonly unknown[]) =>
        rowsOf<R>(await prisma.$queryRawUnsafe<R>(text, ...values)),
    };
  },
};
