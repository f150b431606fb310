import { Injectable } from '@nestjs/common';
import type { OutboxTables } from './outbox-tables.js';

/**
 * Where reliable-mail's tables are, once the start has found them and found them fit for this code (or migrated
 * them). Every statement waits for it; after a failed start each fails with the start's error.
 */
@Injectable()
export class OutboxSchema {
  private resolve!: (tables: OutboxTables) => void;
  private reject!: (error: unknown) => void;
  private readonly found = new Promise<OutboxTables>((resolve, reject) => {
    this.resolve = resolve;
    this.reject = reject;
  });

  constructor() {
    // A failed start rejects it before anything waits: that is not an unhandled rejection.
    this.found.catch(() => undefined);
  }

  tables(): Promise<OutboxTables> {
    return this.found;
  }

  foundAt(tables: OutboxTables): void {
    this.resolve(tables);
  }

  notFound(error: unknown): void {
    this.reject(error);
  }
}
