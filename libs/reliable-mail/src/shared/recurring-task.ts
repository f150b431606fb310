import type { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { reportedAsOutage } from '../database/database-availability.js';

/**
 * Work that runs again `intervalMs` after each run finishes (so two runs never overlap), through a timeout in
 * @nestjs/schedule's registry. A failed run is logged, unless it failed with an outage of the database that was
 * logged as such, and the next one comes as usual.
 */
export class RecurringTask {
  private stopped = false;

  constructor(
    private readonly scheduler: SchedulerRegistry,
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly work: () => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  start(firstDelayMs = this.intervalMs): void {
    this.stopped = false;
    this.schedule(firstDelayMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.scheduler.doesExist('timeout', this.name)) this.scheduler.deleteTimeout(this.name);
  }

  private async run(): Promise<void> {
    this.scheduler.deleteTimeout(this.name);
    try {
      await this.work();
    } catch (error) {
      if (!reportedAsOutage(error))
        this.logger.error({ msg: `${this.name} failed; it runs again at the next interval`, error: String(error) });
    }
    this.schedule(this.intervalMs);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => void this.run(), delayMs);
    timer.unref();
    this.scheduler.addTimeout(this.name, timer);
  }
}
