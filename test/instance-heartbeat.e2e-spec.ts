import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from '@jest/globals';
import { MailOutboxService, type ReliableMailOptions } from '@reliable-mail/nestjs';
import pg from 'pg';
import type { InstanceState } from '../libs/reliable-mail/src/console/console-data.types.js';
import { listInstances } from '../libs/reliable-mail/src/outbox/sql/instances.js';
import { sqlClientOf } from './support/sql-client.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

/** The test options with a worker id of its own: the apps of one test share a host and a pid. */
function instanceOptions(
  smtpUrl: string,
  workerId: string,
  overrides: Partial<ReliableMailOptions> = {},
): ReliableMailOptions {
  const options = testMailOptions(smtpUrl, overrides);
  return { ...options, dispatcher: { ...options.dispatcher, workerId } };
}

/** Each instance's row as the console reads it: its lanes' state, its heartbeat and whether that is stale. */
describe('instance heartbeats', () => {
  const bed = useTestBed();

  async function instances(): Promise<InstanceState[]> {
    const pool = new pg.Pool({ connectionString: bed.databaseUrl, max: 1 });
    try {
      return await listInstances(sqlClientOf(pool));
    } finally {
      await pool.end();
    }
  }

  async function instance(id: string): Promise<InstanceState | undefined> {
    return (await instances()).find((row) => row.id === id);
  }

  afterEach(async () => {
    await bed.execute('delete from mail_instance');
  });

  it('each instance that runs the dispatcher has a row with its lanes, and takes it with it at shutdown', async () => {
    const smtp = await bed.startSmtp();
    const lanes = { default: {}, bulk: {} };
    await bed.startApp(instanceOptions(smtp.url, 'enqueuer', { dispatcher: { enabled: false }, lanes }));
    const first = await bed.startApp(instanceOptions(smtp.url, 'instance-a', { lanes }));
    await bed.startApp(instanceOptions(smtp.url, 'instance-b', { lanes }));

    await waitFor('both heartbeats', async () => (await instances()).length === 2);
    const running = { state: 'running', reason: null, until: null, inFlight: 0 };
    const rows = await instances();
    expect(rows).toEqual(
      ['instance-a', 'instance-b'].map((id) => ({
        id,
        host: hostname(),
        pid: process.pid,
        startedAt: expect.any(Date),
        heartbeatAt: expect.any(Date),
        stale: false,
        lanes: { default: running, bulk: running },
      })),
    );

    await first.close();
    expect((await instances()).map((row) => row.id)).toEqual(['instance-b']);
  });

  it('a lane whose server refuses every session shows in outage within seconds, and running once it takes mail', async () => {
    let refusing = true;
    const smtp = await bed.startSmtp({
      onConnect: () => (refusing ? { code: 554, text: '5.7.1 Your IP is on a blocklist' } : undefined),
    });
    // The default heartbeat of 10 s: the outage shows sooner only because a lane's change is written at once.
    const app = await bed.startApp(instanceOptions(smtp.url, 'instance-out'));
    await waitFor('the first heartbeat', async () => (await instance('instance-out')) !== undefined);
    const enqueuedAt = Date.now();
    await app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Order 1', text: 'Thanks' });

    await waitFor(
      'the lane in outage in the table',
      async () => (await instance('instance-out'))?.lanes.default.state === 'outage',
      5_000,
    );
    expect(Date.now() - enqueuedAt).toBeLessThan(5_000);
    const { lanes } = (await instance('instance-out'))!;
    expect(lanes.default).toMatchObject({ state: 'outage', reason: 'outage', until: expect.any(String) });
    expect(Number.isNaN(Date.parse(lanes.default.until!))).toBe(false);
    expect(lanes.critical).toMatchObject({ state: 'running', reason: null });

    refusing = false;
    await waitFor('the mail delivered', () => smtp.received.length === 1, 15_000);
    await waitFor(
      'the lane running again in the table',
      async () => (await instance('instance-out'))?.lanes.default.state === 'running',
      5_000,
    );
  });

  it('a row whose heartbeat is old shows stale; one silent for a day is deleted by a live heartbeat', async () => {
    const smtp = await bed.startSmtp();
    const insertSilent = (id: string, silence: string) =>
      bed.execute(
        `insert into mail_instance (id, host, pid, started_at, heartbeat_at, heartbeat_ms, lanes)
         values ($1, 'gone-host', 7, now() - interval '3 days', now() - $2::interval, 10000, '{}')`,
        [id, silence],
      );
    await insertSilent('instance-crashed', '1 minute');
    await insertSilent('instance-forgotten', '25 hours');

    await bed.startApp(instanceOptions(smtp.url, 'instance-live'));
    await waitFor('the forgotten row deleted', async () => (await instance('instance-forgotten')) === undefined);
    const rows = await instances();
    expect(rows.map(({ id, stale }) => ({ id, stale }))).toEqual([
      { id: 'instance-crashed', stale: true },
      { id: 'instance-live', stale: false },
    ]);
  });
});
