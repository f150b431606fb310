import type { SchedulerRegistry } from '@nestjs/schedule';
import { InvalidOptionsError } from '../errors.js';

/**
 * The registry of `ScheduleModule.forRoot()`, which the dispatcher's and retention's timers run on. An instance
 * that only enqueues needs neither, so the module asks for it only when one of them is enabled here.
 */
export function requireScheduler(scheduler: SchedulerRegistry | undefined, option: string): SchedulerRegistry {
  if (scheduler) return scheduler;
  throw new InvalidOptionsError(
    option,
    'needs ScheduleModule.forRoot() from @nestjs/schedule among the app module imports; ' +
      'an instance that only enqueues sets dispatcher.enabled: false instead',
  );
}
