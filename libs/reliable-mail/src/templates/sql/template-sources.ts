import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * The sources of the templates an instance loaded from files, all in one statement at its start. A version already
 * kept (another instance of the same deploy, or a restart with unchanged files) stays as it is: its hash says its
 * sources are the same.
 */
// Unnamed: run once per start.
const SAVE = new Statement((t) => ({
  text: `insert into ${t.templateSource} (name, version, sources)
    select * from unnest($1::text[], $2::text[], $3::jsonb[])
    on conflict (name, version) do nothing`,
}));

/** The sources of one version: a mail enqueued with a version this instance did not load. */
const FIND = new Statement((t) => ({
  name: 'reliable_mail_template_source',
  text: `select sources from ${t.templateSource} where name = $1 and version = $2`,
}));

export interface TemplateSourcesRow {
  name: string;
  version: string;
  sources: unknown;
}

export async function saveTemplateSources(db: SqlClient, rows: readonly TemplateSourcesRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(SAVE, [
    rows.map((row) => row.name),
    rows.map((row) => row.version),
    rows.map((row) => JSON.stringify(row.sources)),
  ]);
}

/** The stored sources of the version, or undefined when none are kept. */
export async function findTemplateSources(db: SqlClient, name: string, version: string): Promise<unknown> {
  const [row] = await db.query<{ sources: unknown }>(FIND, [name, version]);
  return row?.sources;
}
