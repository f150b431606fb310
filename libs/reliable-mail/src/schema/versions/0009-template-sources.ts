import type { SchemaVersion } from './schema-version.js';

/**
 * The sources of the templates from files, each version under its hash: the start of an instance writes those of
 * the files it loaded, and an instance that is asked to send a mail enqueued with a version it did not load (one
 * from before a deploy that changed the files, or from a newer instance in a rolling deploy) reads them here. A row
 * per template per changed version: a few kilobytes each, never rewritten, so nothing is compressed or purged.
 */
export const templateSources: SchemaVersion = {
  version: 9,
  name: 'template-sources',
  servesCodeFrom: 1,
  statements: (t) => [
    `create table ${t.templateSource} (
        "name" text not null,
        "version" text not null,
        "sources" jsonb not null,
        "created_at" timestamptz not null default now(),
        primary key ("name", "version")
      )`,
  ],
};
