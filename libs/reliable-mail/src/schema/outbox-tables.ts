/**
 * The PostgreSQL schema reliable-mail keeps its tables in unless `database.schema` names another. A schema of its
 * own, as pg-boss's and graphile-worker's, keeps every app's own schema tooling away from them: Prisma, drizzle-kit
 * and MikroORM diff only the schemas they are told of (`public` by default), so none of them proposes to drop a
 * table it does not know.
 */
export const DEFAULT_SCHEMA = 'reliable_mail';

/** A name PostgreSQL takes unquoted, so that it can be written into statements as it is. */
const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** reliable-mail's tables in the schema they are in, each written as statements name it. */
export interface OutboxTables {
  readonly schema: string;
  readonly outbox: string;
  readonly attempt: string;
  readonly event: string;
  /** The sequence of the events' ids, which an event recorded for relay destinations alone takes its id from too. */
  readonly eventIdSequence: string;
  /** The relay destinations (brokers) registered by the instances that publish to them. */
  readonly relayDestination: string;
  /** The events each relay destination is still owed: a copy per destination, deleted once its broker confirms. */
  readonly relay: string;
  readonly feedback: string;
  readonly suppression: string;
  /** Operators' actions through the console. */
  readonly audit: string;
  /** Each running instance's heartbeat and lane state. */
  readonly instance: string;
  /** The sources of each version of the templates from files, by name and version (their hash). */
  readonly templateSource: string;
  /** The providers' rate and daily quotas and pauses, shared by every instance: a row per quota key. */
  readonly sendQuota: string;
  /** Who unsubscribed from which category of non-transactional mail, by one-click link: a row per pair. */
  readonly unsubscribe: string;
  /** The schema's versions: one row for each applied (or recognised) version. */
  readonly migrations: string;
}

export function isPlainIdentifier(name: unknown): boolean {
  return typeof name === 'string' && PLAIN_IDENTIFIER.test(name);
}

const bySchema = new Map<string, OutboxTables>();

/** The tables in `schema`, one object per schema, so that statements made for it are made once. */
export function tablesIn(schema: string): OutboxTables {
  if (!isPlainIdentifier(schema)) {
    throw new TypeError(`not a plain schema name (lower case letters, digits, _): ${JSON.stringify(schema)}`);
  }
  let tables = bySchema.get(schema);
  if (!tables) {
    tables = {
      schema,
      outbox: `${schema}.mail_outbox`,
      attempt: `${schema}.mail_outbox_attempt`,
      event: `${schema}.mail_outbox_event`,
      eventIdSequence: `${schema}.mail_outbox_event_id_seq`,
      relayDestination: `${schema}.mail_relay_destination`,
      relay: `${schema}.mail_relay`,
      feedback: `${schema}.mail_outbox_feedback`,
      suppression: `${schema}.mail_suppression`,
      audit: `${schema}.mail_console_audit`,
      instance: `${schema}.mail_instance`,
      templateSource: `${schema}.mail_template_source`,
      sendQuota: `${schema}.mail_send_quota`,
      unsubscribe: `${schema}.mail_unsubscribe`,
      migrations: `${schema}.mail_migrations`,
    };
    bySchema.set(schema, tables);
  }
  return tables;
}
