// The SMTP sink of a run: a process of its own, asked for what it received.
import { Child, type IpcPush, now, sleep } from '../common.js';
import type { SinkStats } from './types.js';
import { limit, spawn } from './context.js';

export async function startSink(): Promise<{ sink: Child; port: number }> {
  const sink = spawn('smtp-sink', './smtp-sink.ts', []);
  const { port } = (await sink.waitForPush('listening', 60_000)) as IpcPush & { port: number };
  return { sink, port };
}

export function sinkStats(sink: Child, body: Record<string, unknown> = {}): Promise<SinkStats> {
  return sink.request<SinkStats>('stats', body, 60_000);
}

/** Polls the sink until it holds `count` distinct Message-IDs or `timeoutMs` passes. */
export async function waitForSink(
  sink: Child,
  count: number,
  timeoutMs: number,
  intervalMs = 100,
): Promise<{ stats: SinkStats; timedOut: boolean }> {
  const until = now() + limit(timeoutMs);
  for (;;) {
    const stats = await sinkStats(sink);
    if (stats.unique >= count) return { stats, timedOut: false };
    if (now() > until) return { stats, timedOut: true };
    await sleep(intervalMs);
  }
}
