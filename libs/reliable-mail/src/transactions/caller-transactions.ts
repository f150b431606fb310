import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { MailValidationError } from '../errors.js';
import type { AppOrm } from '../mikro-orm/app-orm.js';
import { WakeUpNotifier } from '../outbox/wake-up.notifier.js';
import { loadIfInstalled } from '../shared/optional-package.js';
import { isPgPool, TRANSACTION_ADAPTERS } from './adapters/index.js';
import { listenForCommits, mikroOrmAdapter } from './adapters/mikro-orm.js';
import type { CallerTransaction } from './caller-transaction.js';

/** The part of @nestjs-cls/transactional's TransactionHost used here. */
interface TransactionHost {
  isTransactionActive(): boolean;
  readonly tx: unknown;
}

const KNOWN_CLIENTS =
  "MikroORM's or TypeORM's EntityManager, a TypeORM QueryRunner, Prisma's interactive transaction client, Drizzle's " +
  "(node-postgres) or Kysely's transaction, or a pg client after BEGIN";

/**
 * Finds the transaction a call writes in: the one it passes (`{ tx }`), else the one the calling code runs in, as
 * @nestjs-cls/transactional's TransactionHost or MikroORM's context carries it. The app's packages are looked up at
 * start, not imported: an app installs only its own stack.
 */
@Injectable()
export class CallerTransactions {
  private appOrm: AppOrm | null = null;
  private host: TransactionHost | null = null;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly wakeUp: WakeUpNotifier,
  ) {}

  /** Looks up the app's MikroORM and TransactionHost, where it has them; returns the ORM for the rest of the start. */
  async discover(): Promise<AppOrm | null> {
    const mikroOrm = await loadIfInstalled('@mikro-orm/postgresql', () => import('../mikro-orm/app-orm.js'));
    this.appOrm = mikroOrm?.AppOrm.find(this.moduleRef) ?? null;
    if (this.appOrm) listenForCommits(this.appOrm.em, this.wakeUp);
    const cls = await loadIfInstalled('@nestjs-cls/transactional', () => import('@nestjs-cls/transactional'));
    try {
      this.host = cls ? this.moduleRef.get<unknown, TransactionHost>(cls.TransactionHost, { strict: false }) : null;
    } catch {
      // Installed, but not set up in this app.
      this.host = null;
    }
    return this.appOrm;
  }

  /** The transaction of a call, or null when it runs in none (it then commits on reliable-mail's own connection). */
  of(tx: unknown): CallerTransaction | null {
    if (tx !== undefined && tx !== null) return this.adapt(tx);
    if (this.host?.isTransactionActive()) return this.adapt(this.host.tx);
    return this.appOrm ? mikroOrmAdapter.open(this.appOrm.em, this.wakeUp) : null;
  }

  private adapt(tx: unknown): CallerTransaction | null {
    if (typeof tx !== 'object' || tx === null) {
      throw new MailValidationError('tx', `must be the caller's transaction: ${KNOWN_CLIENTS}`);
    }
    if (isPgPool(tx)) {
      throw new MailValidationError(
        'tx',
        'is a pg pool, whose queries may each take another connection: pass the client BEGIN ran on',
      );
    }
    const adapter = TRANSACTION_ADAPTERS.find((candidate) => candidate.recognises(tx));
    if (!adapter)
      throw new MailValidationError('tx', `is no transaction reliable-mail writes through: ${KNOWN_CLIENTS}`);
    return adapter.open(tx, this.wakeUp);
  }
}
