#!/usr/bin/env node
// npx reliable-mail: the schema's verbs for deploy scripts and operators, reading DATABASE_URL. Requeue, cancel and
// purge stay with MailOutboxAdmin, in code, where they are validated and audited.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { statementsOnClient } from '../database/sql-client.js';
import { outboxStats, partitionsAhead } from '../outbox/sql/health.js';
import { migrateSchema, migrationConnection } from '../schema/migrate-schema.js';
import { readSchemaState } from '../schema/schema-state.js';
import { eventRelay } from '../schema/versions/0014-event-relay.js';
import { KNOWN_SCHEMA_VERSION } from '../schema/schema-steps.js';
import { MIGRATE_COMMAND, schemaProblem } from '../schema/schema-verdict.js';
import {
  convertToPartitions,
  createPartitionsAhead,
  DEFAULT_PARTITIONS_AHEAD,
  isPartitioned,
  MIN_PARTITIONS_AHEAD,
} from '../schema/partitioned-layout.js';
import { registeredDestinations, removeDestination } from '../relay/sql/destinations.js';
import { renderSchemaSql } from '../schema/schema-sql.js';
import { DEFAULT_SCHEMA, isPlainIdentifier, tablesIn } from '../schema/outbox-tables.js';
import { PACKAGE_VERSION } from '../startup/package-version.js';

const USAGE = `Usage: reliable-mail <command> [--schema <name>] [--url <postgres://…>]

  migrate        brings reliable-mail's schema to this release's version (${KNOWN_SCHEMA_VERSION}), one version per
                 transaction, under an advisory lock: safe beside running instances and other migrations;
                 --partition then converts the outbox to day partitions (docs/database.md, "Partitions")
  partitions     makes a partitioned outbox's partitions up to --ahead <n> days after today (default ${DEFAULT_PARTITIONS_AHEAD}),
                 for teams whose tool owns DDL; retention makes them too, where it runs
  relay          the event relay's destinations, each with the events it is owed and since when;
                 relay remove <name> takes one out of service and deletes its backlog; refused while an instance
                 published to it in the last 3 minutes, unless --force
  status         the schema's version, and the outbox: rows by status and lane, backlog, oldest due, dead letters
                 (--json for a machine)
  sql            prints the SQL of the versions after --from <n> (default 0), for a migration tool that owns DDL

The database is --url, else DATABASE_URL. The schema is --schema, else reliable-mail's own (${DEFAULT_SCHEMA}), or the
app's own schema where earlier releases' MikroORM migrations made the tables.`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      schema: { type: 'string' },
      url: { type: 'string' },
      from: { type: 'string' },
      json: { type: 'boolean' },
      partition: { type: 'boolean' },
      force: { type: 'boolean' },
      ahead: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return command || values.help ? 0 : 2;
  }
  if (values.schema !== undefined && !isPlainIdentifier(values.schema)) {
    console.error(
      `--schema must be a name PostgreSQL takes unquoted (lower case letters, digits, _): ${values.schema}`,
    );
    return 2;
  }
  if (command === 'sql') {
    const from = Number(values.from ?? 0);
    if (!Number.isInteger(from) || from < 0 || from > KNOWN_SCHEMA_VERSION) {
      console.error(`--from must be a version from 0 to ${KNOWN_SCHEMA_VERSION}`);
      return 2;
    }
    process.stdout.write(renderSchemaSql(values.schema ?? DEFAULT_SCHEMA, from));
    return 0;
  }
  if (!['migrate', 'status', 'partitions', 'relay'].includes(command)) {
    console.error(`unknown command: ${command}\n\n${USAGE}`);
    return 2;
  }
  const ahead = Number(values.ahead ?? DEFAULT_PARTITIONS_AHEAD);
  if (!Number.isInteger(ahead) || ahead < MIN_PARTITIONS_AHEAD || ahead > 366) {
    console.error(`--ahead must be a number of days from ${MIN_PARTITIONS_AHEAD} (health's least) to 366`);
    return 2;
  }
  const url = values.url ?? process.env.DATABASE_URL;
  if (!url) {
    console.error('set DATABASE_URL (or --url) to the database: postgres://user:password@host:5432/name');
    return 2;
  }
  const client = new pg.Client({ connectionString: url, application_name: 'reliable-mail cli' });
  await client.connect();
  try {
    if (command === 'migrate') {
      const { schema, from, to } = await migrateSchema(migrationConnection(client), values.schema);
      console.log(
        from === to
          ? `reliable-mail: schema "${schema}" is at version ${to}, this release's: nothing to do`
          : `reliable-mail: schema "${schema}" migrated from version ${from} to ${to}`,
      );
      if (values.partition) {
        const tables = tablesIn(schema);
        const { converted, legacyUntil } = await convertToPartitions(migrationConnection(client), tables, ahead);
        console.log(
          converted
            ? `reliable-mail: the outbox of schema "${schema}" is partitioned by day; its rows of before ` +
                `${legacyUntil} are in its first partition, and the days up to ${ahead} after today have theirs`
            : `reliable-mail: the outbox of schema "${schema}" was already partitioned by day: nothing to convert ` +
                `(\`reliable-mail partitions --ahead <n>\` makes days ahead)`,
        );
      }
      return 0;
    }
    if (command === 'partitions') return await partitions(client, values.schema, ahead);
    if (command === 'relay') return await relay(client, values.schema, positionals.slice(1), values.force ?? false);
    return await status(client, values.schema, values.json ?? false);
  } finally {
    await client.end();
  }
}

async function partitions(client: pg.Client, schema: string | undefined, ahead: number): Promise<number> {
  const connection = migrationConnection(client);
  const { tables } = await readSchemaState(connection, schema);
  if (!(await isPartitioned(connection, tables))) {
    console.error(
      `reliable-mail: the outbox of schema "${tables.schema}" is not partitioned (\`${MIGRATE_COMMAND} --partition\` ` +
        `converts it)`,
    );
    return 1;
  }
  const made = await createPartitionsAhead(connection, tables, ahead);
  const daysAhead = await partitionsAhead(statementsOnClient(client, tables));
  console.log(
    made.length === 0
      ? `reliable-mail: partitions cover ${daysAhead} days after today: nothing to do`
      : `reliable-mail: made the partitions of ${made.join(', ')}; they cover ${daysAhead} days after today`,
  );
  return 0;
}

async function relay(client: pg.Client, schema: string | undefined, args: string[], force: boolean): Promise<number> {
  const { tables, version } = await readSchemaState(migrationConnection(client), schema);
  if (version < eventRelay.version) {
    console.error(
      `reliable-mail: schema "${tables.schema}" is at version ${version}; the event relay's tables come with version ` +
        `${eventRelay.version} (\`${MIGRATE_COMMAND}\`)`,
    );
    return 1;
  }
  const statements = statementsOnClient(client, tables);
  if (args.length === 0) {
    const destinations = await registeredDestinations(statements);
    if (destinations.length === 0) console.log('reliable-mail: no relay destination is registered');
    else {
      console.table(
        destinations.map(({ name, owed, oldest, seen_at, last_error }) => ({
          name,
          owed,
          oldest: oldest?.toISOString() ?? 'none',
          'last seen': seen_at?.toISOString() ?? 'not registered',
          'last error': last_error ?? '',
        })),
      );
    }
    return 0;
  }
  const [verb, name] = args;
  if (verb !== 'remove' || !name || args.length > 2) {
    console.error(`usage: reliable-mail relay [remove <name> [--force]]\n\n${USAGE}`);
    return 2;
  }
  const removed = await removeDestination(statements, name, force);
  if (!removed.removed) {
    console.error(
      `reliable-mail: an instance published to relay destination "${name}" ${Math.round(removed.unseenMs / 1000)} s ` +
        'ago: remove it from every instance first (or pass --force)',
    );
    return 1;
  }
  console.log(
    removed.registered
      ? `reliable-mail: relay destination "${name}" removed, with the ${removed.droppedEvents} events it was owed`
      : `reliable-mail: no relay destination "${name}" is registered; ${removed.droppedEvents} events owed to it deleted`,
  );
  return 0;
}

async function status(client: pg.Client, schema: string | undefined, json: boolean): Promise<number> {
  const state = await readSchemaState(migrationConnection(client), schema);
  const problem = schemaProblem(state, PACKAGE_VERSION);
  const stats = state.version === 0 ? null : await outboxStats(statementsOnClient(client, state.tables));
  if (json) {
    console.log(
      JSON.stringify({ schema: state.tables.schema, version: state.version, problem, outbox: stats }, null, 2),
    );
    return problem ? 1 : 0;
  }
  console.log(
    `schema "${state.tables.schema}": version ${state.version} (${state.source}); this release knows ${KNOWN_SCHEMA_VERSION}`,
  );
  if (problem) console.log(`problem: ${problem}`);
  if (stats) {
    const oldestDue = stats.lagMs > 0 ? new Date(Date.now() - stats.lagMs).toISOString() : 'none';
    console.log(
      `backlog: ${stats.backlog}, oldest due: ${oldestDue}, dead letters in the last hour: ${stats.deadLetters}`,
    );
    console.log(`sent in the last minute / hour: ${stats.sent.lastMinute} / ${stats.sent.lastHour}`);
    console.table(stats.counts);
  }
  return problem ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error(`reliable-mail: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
