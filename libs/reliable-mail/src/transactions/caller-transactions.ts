import { Injectable } from '@nestjs/common';
import { MailValidationError } from '../errors.js';
import { isPgPool, TRANSACTION_ADAPTERS } from './adapters/index.js';
import { mikroOrmAdapter } from './adapters/mikro-orm.js';
import type { CallerTransaction, TransactionEnds } from './caller-transaction.js';

/** What carries the transaction a caller's code runs in, where the app has it (found at start). */
export interface AmbientTransactions {
  /** @nestjs-cls/transactional's TransactionHost (the part used here). */
  readonly host: { isTransactionActive(): boolean; readonly tx: unknown } | null;
  /** The app's MikroORM EntityManager, which resolves to the transaction's fork inside `em.transactional()`. */
  readonly mikroOrm: object | null;
}

const KNOWN_CLIENTS =
  "MikroORM's or TypeORM's EntityManager, a TypeORM QueryRunner or Repository, Prisma's interactive transaction " +
  "client, Drizzle's (node-postgres) or Kysely's transaction, or a pg client after BEGIN";

/**
 * Finds the transaction a call writes in: the one it passes (`{ tx }`), else the one the calling code runs in, as
 * @nestjs-cls/transactional's TransactionHost or MikroORM's context carries it.
 */
@Injectable()
export class CallerTransactions {
  private ambient: AmbientTransactions = { host: null, mikroOrm: null };

  /** Set by the start, which looks them up in the app (nothing here imports the app's packages). */
  useAmbient(ambient: AmbientTransactions): void {
    this.ambient = ambient;
  }

  /**
   * The transaction of a call, or null when it runs in none (it then commits on reliable-mail's own connection).
   * `ends` is told of its end where the stack reports it.
   */
  of(tx: unknown, ends: TransactionEnds): CallerTransaction | null {
    if (tx !== undefined && tx !== null) return adapt(tx, ends);
    const { host, mikroOrm } = this.ambient;
    if (host?.isTransactionActive()) return adapt(host.tx, ends);
    return mikroOrm ? mikroOrmAdapter.open(mikroOrm, ends) : null;
  }
}

function adapt(tx: unknown, ends: TransactionEnds): CallerTransaction | null {
  if (typeof tx !== 'object' || tx === null) {
    throw new MailValidationError('tx', `must be the caller's transaction: ${KNOWN_CLIENTS}`);
  }
  try {
    if (isPgPool(tx)) {
      throw new MailValidationError(
        'tx',
        'is a pg pool, whose queries may each take another connection: pass the client BEGIN ran on',
      );
    }
    const adapter = TRANSACTION_ADAPTERS.find((candidate) => candidate.recognises(tx));
    if (!adapter)
      throw new MailValidationError('tx', `is no transaction reliable-mail writes through: ${KNOWN_CLIENTS}`);
    return adapter.open(tx, ends);
  } catch (error) {
    // Reading it threw (a getter, a method of an object that only looks like a client): no SQL has run.
    if (error instanceof MailValidationError) throw error;
    throw new MailValidationError(
      'tx',
      `could not be read as a transaction: ${error instanceof Error ? error.message : `a thrown ${typeof error}`}`,
    );
  }
}
