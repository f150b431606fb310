import type { MailOutboxHealthIndicator } from '@reliable-mail/nestjs';
import { waitFor } from './test-app.js';

/** What the health indicator says of one lane. */
export interface LaneHealth {
  paused: boolean;
  probing: boolean;
  reason?: 'outage' | 'slow-down' | 'connection-failure';
}

/** Waits until the health indicator shows the lane paused; returns the check and the lane's entry then. */
export async function pausedLaneHealth(health: MailOutboxHealthIndicator, lane: string) {
  const check = async () => {
    const { mail } = await health.isHealthy('mail');
    return { status: mail, lane: (mail.dispatcher as { lanes: Record<string, LaneHealth> }).lanes[lane] };
  };
  let seen: Awaited<ReturnType<typeof check>> | undefined;
  await waitFor(`lane ${lane} to pause`, async () => (seen = await check()).lane?.paused ?? false);
  return seen!;
}
