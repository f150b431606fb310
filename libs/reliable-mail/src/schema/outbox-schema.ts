import { Injectable } from '@nestjs/common';
import type { OutboxTables } from './outbox-tables.js';

/**
 * Where reliable-mail's tables are, once the start has found them fit for this code (or migrated them). Every
 * statement waits for it. The first to ask runs the start, should it come before the start's own hook (another
 * module's onModuleInit that enqueues): it waits for the start rather than for a hook that runs after it.
 */
@Injectable()
export class OutboxSchema {
  private start: (() => Promise<OutboxTables>) | null = null;
  private found: Promise<OutboxTables> | null = null;

  /** Called by the start's constructor: the start runs once, at its hook or at the first statement. */
  startsWith(start: () => Promise<OutboxTables>): void {
    this.start = start;
  }

  tables(): Promise<OutboxTables> {
    if (!this.start) throw new Error("reliable-mail's start is not wired: ReliableMailModule was not instantiated");
    return (this.found ??= this.start());
  }
}
