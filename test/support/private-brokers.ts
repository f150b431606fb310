import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { connect as connectAmqp } from 'amqplib';
import { freePort } from './private-postgres.js';
import { logTail, type RunningServer, startLoggedServer } from './server-process.js';

const execFileAsync = promisify(execFile);
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const PROBE_INTERVAL_MS = 100;
/** Bounds one readiness probe, so that a server which accepts the connection but never answers cannot stall it. */
const PROBE_TIMEOUT_MS = 2_000;

/** How `restart` ends the running broker: 'graceful' lets it shut down (SIGTERM), 'kill' is a crash (SIGKILL). */
export type BrokerStop = 'graceful' | 'kill';

interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

interface Launch {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

/**
 * A broker of one test's own, in a fresh temporary folder, which the test may stop, crash and restart without
 * disturbing the shared broker other test files use. A restart keeps the port and the folder, so what the broker
 * stored durably is there again.
 *
 * The server is a child of the test process, run through `setpriv --pdeathsig=SIGKILL`: the kernel kills it whenever
 * the test process ends, even by SIGKILL or a worker's forced exit, where an 'exit' handler would not run. That signal
 * reaches only the process setpriv becomes, so the command must exec its way to the server rather than fork it.
 */
abstract class PrivateBroker {
  private server: RunningServer | undefined;

  protected constructor(
    /** For messages: the broker and its port. */
    private readonly title: string,
    protected readonly folder: string,
    readonly port: number,
    private readonly readyTimeoutMs: number,
    /** Whom the server runs as; the current user when undefined. */
    private readonly osUser: OsUser | undefined,
  ) {}

  abstract get url(): string;

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.isRunning() ? this.server!.child.pid : undefined;
  }

  /** Starts the server again, on the same port and folder, after `stop` or `kill`; returns once it is ready. */
  async start(): Promise<void> {
    if (this.isRunning()) throw new Error(`${this.title} is already running`);
    const { command, args, env } = this.launch();
    const user = this.osUser ? [`--reuid=${this.osUser.name}`, `--regid=${this.osUser.name}`, '--clear-groups'] : [];
    const { server, logStart } = await startLoggedServer(
      this.folder,
      'setpriv',
      [...user, '--pdeathsig=SIGKILL', command, ...args],
      { env },
    );
    this.server = server;
    try {
      await this.waitUntilReady(server);
    } catch (error) {
      await this.kill();
      const tail = await logTail(this.folder, logStart);
      throw new Error(`${this.title} did not start: ${(error as Error).message}\n  ${tail}`, { cause: error });
    }
  }

  /** Lets the server shut down (SIGTERM) and returns once it has exited. */
  async stop(): Promise<void> {
    await this.end('SIGTERM');
  }

  /** Kills the server (SIGKILL), as a crash, and returns once it has exited. */
  async kill(): Promise<void> {
    await this.end('SIGKILL');
  }

  async restart(how: BrokerStop = 'graceful'): Promise<void> {
    await this.end(how === 'graceful' ? 'SIGTERM' : 'SIGKILL');
    await this.start();
  }

  /** Kills the server (its data is thrown away: no need to wait for a shutdown) and deletes its folder. */
  async close(): Promise<void> {
    await this.kill();
    await rm(this.folder, { recursive: true, force: true });
  }

  /** The command that runs the server in the foreground, exec'ing into it. */
  protected abstract launch(): Launch;

  /** Resolves once the server serves what the tests need of it; rejects while it does not yet. */
  protected abstract probe(): Promise<void>;

  private async end(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const server = this.server;
    if (!server) return;
    if (this.isRunning()) server.child.kill(signal);
    await server.exited;
    this.server = undefined;
  }

  private isRunning(): boolean {
    return this.server !== undefined && this.server.child.exitCode === null && this.server.child.signalCode === null;
  }

  private async waitUntilReady({ child, exited }: RunningServer): Promise<void> {
    let hasExited = false;
    void exited.then(() => (hasExited = true));
    const deadline = Date.now() + this.readyTimeoutMs;
    while (!hasExited) {
      try {
        await this.probe();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`not ready after ${this.readyTimeoutMs / 1000} s (${(error as Error).message})`, {
            cause: error,
          });
      }
      await delay(PROBE_INTERVAL_MS);
    }
    throw new Error(`the server exited (${child.signalCode ?? `code ${child.exitCode}`})`);
  }
}

/** A NATS server with JetStream, on 127.0.0.1; its store is in the folder. */
export class PrivateNats extends PrivateBroker {
  private constructor(folder: string, port: number) {
    super(`NATS on port ${port}`, folder, port, 30_000, undefined);
  }

  static async start(): Promise<PrivateNats> {
    return startedIn('private-nats-', undefined, async (folder) => new PrivateNats(folder, await freePort()));
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    return {
      command: '/usr/sbin/nats-server',
      args: ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', join(this.folder, 'store')],
      env: process.env,
    };
  }

  /** The server restores the streams from its store before it accepts clients; JetStream then answers. */
  protected async probe(): Promise<void> {
    const connection = await connectNats({ servers: this.url, reconnect: false, timeout: PROBE_TIMEOUT_MS });
    try {
      await (await jetstreamManager(connection, { timeout: PROBE_TIMEOUT_MS })).getAccountInfo();
    } finally {
      await connection.close();
    }
  }
}

const RABBITMQ_OS_USER = 'rabbitmq';

/**
 * A RabbitMQ node, without plugins, listening for AMQP on 127.0.0.1 (guest/guest, which RabbitMQ allows from
 * localhost only); its data, logs, Erlang cookie and configuration are in the folder. The machine's files in
 * /etc/rabbitmq describe the shared node, so none of them is read.
 *
 * When the tests run as root the node runs as the `rabbitmq` OS user, as the shared one does, and owns the folder.
 * It registers its name (`private-<port>@localhost`) with the machine's epmd, which the shared node started and
 * which outlives them both.
 */
export class PrivateRabbitMq extends PrivateBroker {
  private constructor(
    folder: string,
    port: number,
    /** Erlang distribution's listening port, which would otherwise be the AMQP port + 20000. */
    private readonly distributionPort: number,
    osUser: OsUser | undefined,
  ) {
    super(`RabbitMQ on port ${port}`, folder, port, 60_000, osUser);
  }

  static async start(): Promise<PrivateRabbitMq> {
    const osUser = await rabbitMqOsUser();
    return startedIn('private-rabbitmq-', osUser, async (folder) => {
      await writeFile(join(folder, 'enabled_plugins'), '[].\n');
      const port = await freePort();
      let distributionPort: number;
      do distributionPort = await freePort();
      while (distributionPort === port);
      return new PrivateRabbitMq(folder, port, distributionPort, osUser);
    });
  }

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    const inFolder = (name: string) => join(this.folder, name);
    return {
      // Debian's /usr/sbin/rabbitmq-server would switch to the rabbitmq user through su, which keeps no
      // parent-death signal; this is the script it runs.
      command: '/usr/lib/rabbitmq/bin/rabbitmq-server',
      args: [],
      env: {
        PATH: process.env.PATH,
        LANG: 'C.UTF-8',
        // Erlang keeps the cookie in $HOME: the node gets a fresh one of its own.
        HOME: this.folder,
        // With NOTIFY_SOCKET set the script believes systemd runs it and execs the Erlang VM, which the parent-death
        // signal then reaches; otherwise it runs the VM as a child of its own and forwards signals to it. Nothing
        // listens on the socket: RabbitMQ's "ready" notification to it fails without consequence.
        NOTIFY_SOCKET: inFolder('no-systemd.sock'),
        RABBITMQ_NODENAME: `private-${this.port}@localhost`,
        RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
        RABBITMQ_NODE_PORT: String(this.port),
        RABBITMQ_DIST_PORT: String(this.distributionPort),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
        // Neither file exists: RabbitMQ then runs on its defaults and the variables set here.
        RABBITMQ_CONF_ENV_FILE: inFolder('rabbitmq-env.conf'),
        RABBITMQ_CONFIG_FILE: inFolder('rabbitmq.conf'),
        RABBITMQ_ENABLED_PLUGINS_FILE: inFolder('enabled_plugins'),
        RABBITMQ_MNESIA_BASE: inFolder('mnesia'),
        RABBITMQ_LOG_BASE: inFolder('log'),
        // To standard output, which goes to server.log with what the VM writes there.
        RABBITMQ_LOGS: '-',
        RABBITMQ_PID_FILE: inFolder('rabbitmq.pid'),
      },
    };
  }

  /** The AMQP listener is the last thing the node starts: a connection means it is ready. */
  protected async probe(): Promise<void> {
    const connection = await connectAmqp(this.url, { timeout: PROBE_TIMEOUT_MS });
    await connection.close();
  }
}

/**
 * A fresh folder (owned by `owner`), the broker `create` makes in it, started; the folder goes if it does not start.
 */
async function startedIn<T extends PrivateBroker>(
  prefix: string,
  owner: OsUser | undefined,
  create: (folder: string) => Promise<T>,
): Promise<T> {
  const folder = await mkdtemp(join(tmpdir(), prefix));
  try {
    if (owner) await chown(folder, owner.uid, owner.gid);
    const broker = await create(folder);
    await broker.start();
    return broker;
  } catch (error) {
    await rm(folder, { recursive: true, force: true });
    throw error;
  }
}

let rabbitMqUser: Promise<OsUser | undefined> | undefined;

/** The `rabbitmq` OS user when the tests run as root, else undefined (the node runs as the current user). */
function rabbitMqOsUser(): Promise<OsUser | undefined> {
  rabbitMqUser ??= (async () => {
    if (process.getuid?.() !== 0) return undefined;
    const id = async (flag: string) =>
      Number.parseInt((await execFileAsync('id', [flag, RABBITMQ_OS_USER])).stdout, 10);
    return { name: RABBITMQ_OS_USER, uid: await id('-u'), gid: await id('-g') };
  })();
  return rabbitMqUser;
}
