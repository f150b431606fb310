import { Logger } from 'graphile-worker';

/** graphile-worker's logger, with only its errors. */
export const graphileLogger = new Logger(() => (level, message) => {
  if (level === 'error') console.error('[graphile-worker]', message);
});
