/**
 * What stands between reliable-mail's own connections and PostgreSQL (`database.pooler`): nothing, a pooler that
 * gives each client connection a server session of its own for as long as it lasts (PgBouncer's `pool_mode =
 * session`), or one that lends a server session for one transaction at a time (`pool_mode = transaction`).
 */
export type Pooler = 'none' | 'session' | 'transaction';

export const POOLERS: readonly Pooler[] = ['none', 'session', 'transaction'];

/**
 * The settings every statement of reliable-mail's own connections runs under, whatever the database's or the role's
 * defaults.
 * - Each named statement is prepared once per connection and planned once, at its first run (a generic plan):
 *   planning the claim at every run cost 0.4-0.6 ms (the bench's claim figures at 87df0c2) on the path of every idle
 *   mail. A generic plan made while the tables were empty is kept once they have grown, so every statement reaches
 *   every table through an index condition, whatever the statistics (primary key arrays, partial indexes;
 *   test/generic-plans checks each); with sequential scans off, the planner takes that path even on an empty table,
 *   where a whole scan looks as cheap.
 * - Claims and settles must survive a crash of the server (see claim.ts), whatever the database's or the role's
 *   default: with synchronous_commit off, a crash during a send would take the claim with it.
 * - No JIT: the statements are short, and a generic plan over a partitioned outbox is estimated dear enough to pass
 *   jit_above_cost, whose compilation then cost each run more than the run itself: a claim of 8 over 44 days'
 *   partitions took 4.2-6.3 s with JIT and 14-22 ms without (PostgreSQL 15, test/partitions/retention).
 */
const SETTINGS = [
  ['plan_cache_mode', 'force_generic_plan'],
  ['enable_seqscan', 'off'],
  ['synchronous_commit', 'on'],
  ['jit', 'off'],
] as const;

/** The settings as the `options` startup parameter of a connection to PostgreSQL itself. */
export const CONNECTION_SETTINGS = SETTINGS.map(([name, value]) => `-c ${name}=${value}`).join(' ');

/** How reliable-mail's own connections keep their settings and statements, given what they go through. */
export interface ConnectionPlan {
  /**
   * The startup parameters of each connection (`options`, `statement_timeout`), or null: PgBouncer refuses a
   * connection with any startup parameter it does not track ("unsupported startup parameter: options"), in either
   * mode, and one it was told to ignore (`ignore_startup_parameters`) would silently leave the settings unset.
   */
  startup: { options: string; statementTimeoutMs: number } | null;
  /** Sent once on each new connection of the pool: a session pooler keeps a SET for as long as that connection. */
  onConnect: string | null;
  /**
   * What opens each transaction of reliable-mail's own. Under transaction pooling it sets the settings with SET
   * LOCAL: the server session is lent for that transaction only, and a SET would stay on it for the next client.
   */
  begin: string;
  /**
   * Whether each statement run alone runs in a transaction `begin` opens, and `commit` ends (transaction pooling:
   * there is no session to keep the settings in). Two more round trips per statement.
   */
  statementInTransaction: boolean;
  /**
   * Whether statements go by name, prepared once per connection. A transaction pooler lends the statement another
   * server session than the one that prepared it ("prepared statement … does not exist"), unless it prepares
   * statements itself on each: PgBouncer 1.21 or later with `max_prepared_statements` above 0.
   */
  namedStatements: boolean;
  /**
   * Where the wake-up listener's LISTEN goes: `url`, where the pool connects; `listenUrl`, a connection of its own
   * to PostgreSQL itself; or null, nowhere: a transaction pooler delivers no notification to a session it lent
   * back, and the dispatchers poll (`dispatcher.pollIntervalMs`).
   */
  listen: 'url' | 'listenUrl' | null;
}

export interface ConnectionPlanOptions {
  pooler: Pooler;
  preparedStatements: boolean;
  statementTimeoutMs: number;
  listenUrl: string | null;
}

/** How the connections keep their settings through `pooler` (see ConnectionPlan). */
export function connectionPlan({
  pooler,
  preparedStatements,
  statementTimeoutMs,
  listenUrl,
}: ConnectionPlanOptions): ConnectionPlan {
  const settings: ReadonlyArray<readonly [string, string]> = [
    ...SETTINGS,
    ['statement_timeout', String(statementTimeoutMs)],
  ];
  const set = (scope: 'set' | 'set local') => settings.map(([name, value]) => `${scope} ${name} = ${value}`);
  return {
    startup: pooler === 'none' ? { options: CONNECTION_SETTINGS, statementTimeoutMs } : null,
    onConnect: pooler === 'session' ? set('set').join('; ') : null,
    begin: pooler === 'transaction' ? ['begin', ...set('set local')].join('; ') : 'begin',
    statementInTransaction: pooler === 'transaction',
    namedStatements: preparedStatements,
    listen: listenUrl !== null ? 'listenUrl' : pooler === 'transaction' ? null : 'url',
  };
}
