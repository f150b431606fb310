import type { Logger } from '@nestjs/common';

/**
 * A start-up step that failed. The message names the step ("Start-up failed while listening on port 3000: …"),
 * because the error of the step alone ("connect ECONNREFUSED 127.0.0.1:5432") rarely says what was being done.
 */
export class StartupError extends Error {
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super(`Start-up failed while ${step}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Runs one step of the start-up; what it throws comes out as a `StartupError` naming the step. */
export async function startupStep<T>(step: string, run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw error instanceof StartupError ? error : new StartupError(step, error);
  }
}

/**
 * Logs why the start-up failed: the message alone, or with DEBUG set the stack of the error underneath, which the
 * user otherwise rarely needs (`hint` says how to get it).
 */
export function logStartupFailure(logger: Logger, error: unknown, debug: boolean, hint: string): void {
  const failure = error instanceof StartupError ? error : new StartupError('starting', error);
  if (debug && failure.cause instanceof Error) logger.error(failure.message, failure.cause.stack);
  else logger.error(`${failure.message}\n(${hint})`);
}
