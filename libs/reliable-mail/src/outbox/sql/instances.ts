import type { InstanceLaneState, InstanceState } from '../../console/console-data.types.js';
import { type QueryBound, type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from './timestamps.js';

// Each instance that runs the dispatcher keeps one row here, under its `dispatcher.workerId`, because its lanes'
// pauses live in its own memory and the console must show every instance's. Heartbeats are written with the
// database's clock, so that staleness never depends on how far one machine's clock is off another's.

/**
 * Writes instance $1's heartbeat and lanes ($5), and deletes the rows of the other instances silent for a day. The
 * delete is here rather than in retention because the heartbeat runs wherever a dispatcher runs, while retention
 * may be turned off, and a table of one row per instance needs no batches of its own. A day rather than a few
 * heartbeats, so that a crashed instance stays in view, as stale, long enough for an operator to notice. Rows being
 * deleted by another instance's heartbeat at that moment are skipped, so two heartbeats never wait on each other.
 */
const HEARTBEAT = new Statement((t) => ({
  name: 'reliable_mail_heartbeat',
  text: `with forgotten as (
      delete from ${t.instance} where id = any(array(
        select id from ${t.instance}
        where id <> $1 and heartbeat_at < now() - interval '1 day'
        for update skip locked
      ))
    )
    insert into ${t.instance} (id, host, pid, started_at, heartbeat_at, heartbeat_ms, lanes)
    values ($1, $2, $3, $4, now(), $6, $5::jsonb)
    on conflict (id) do update set host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
      heartbeat_at = excluded.heartbeat_at, heartbeat_ms = excluded.heartbeat_ms, lanes = excluded.lanes`,
}));

/** An instance that shuts down takes its row with it: the console shows the instances that run. */
// Unnamed: run once per instance, at its shutdown.
const REMOVE = new Statement((t) => ({
  text: `delete from ${t.instance} where id = $1`,
}));

/**
 * Every instance's row, the longest running first, stale once three of its own heartbeats are missing by the clock
 * that wrote them: instances may be configured apart.
 */
// Unnamed: the console's, run now and then.
const INSTANCES = new Statement((t) => ({
  text: `select id, host, pid, started_at, heartbeat_at, lanes,
      heartbeat_at < now() - 3 * heartbeat_ms * interval '1 millisecond' as stale
    from ${t.instance} order by started_at, id`,
}));

export interface Heartbeat {
  id: string;
  host: string;
  pid: number;
  startedAt: Date;
  /** The instance's `dispatcher.heartbeatMs`, by which a reader tells a stale row. */
  heartbeatMs: number;
  lanes: Record<string, InstanceLaneState>;
}

export async function writeHeartbeat(db: SqlClient, heartbeat: Heartbeat): Promise<void> {
  const { id, host, pid, startedAt, heartbeatMs, lanes } = heartbeat;
  await db.query(HEARTBEAT, [id, host, pid, startedAt, JSON.stringify(lanes), heartbeatMs]);
}

export async function removeInstance(db: SqlClient, id: string, bound?: QueryBound): Promise<void> {
  await db.query(REMOVE, [id], bound);
}

export async function listInstances(db: SqlClient): Promise<InstanceState[]> {
  const rows = await db.query<{
    id: string;
    host: string;
    pid: number;
    started_at: Date;
    heartbeat_at: Date;
    lanes: Record<string, InstanceLaneState>;
    stale: boolean;
  }>(INSTANCES, []);
  return rows.map((row) => ({
    id: row.id,
    host: row.host,
    pid: row.pid,
    startedAt: toDate(row.started_at),
    heartbeatAt: toDate(row.heartbeat_at),
    stale: row.stale,
    lanes: row.lanes,
  }));
}
