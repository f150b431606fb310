import { randomFillSync } from 'node:crypto';

// Random bytes are drawn 4 KiB at a time: asking the system for 10 bytes per id cost more than the rest of an enqueue.
const randomPool = Buffer.alloc(4096);
let poolOffset = randomPool.length;

/**
 * A UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits. Ids made later sort later (to
 * the millisecond), so the primary key index of the outbox grows at its right edge instead of at random pages.
 */
export function uuidv7(now = Date.now()): string {
  if (poolOffset + 10 > randomPool.length) {
    randomFillSync(randomPool);
    poolOffset = 0;
  }
  const random = randomPool.toString('hex', poolOffset, poolOffset + 10);
  poolOffset += 10;
  const time = now.toString(16).padStart(12, '0');
  const variant = ((Number.parseInt(random[3], 16) & 0x3) | 0x8).toString(16);
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(0, 3)}-${variant}${random.slice(4, 7)}-${random.slice(7, 19)}`;
}
