import type { SchemaVersion } from './schema-version.js';

/**
 * Makes the outbox rows cheaper to write, at the enqueue and at every status change:
 * - `content_hash` is only needed to compare a retried enqueue with its idempotency key's row, so rows without a
 *   key no longer carry one;
 * - a Message-ID is `<id@domain>` of the row's own id: unique by construction and found through the primary key, so
 *   its unique index was one more index entry to write at the insert and at every status change;
 * - a ~2 KB payload makes the row just large enough for PostgreSQL to compress it, and lz4 (PostgreSQL 14+, when
 *   built with it) does that at a fraction of the default pglz's cost. Where lz4 is not available (PostgreSQL 13,
 *   or a build without it) pglz stays.
 */
export const lighterRows: SchemaVersion = {
  version: 2,
  name: 'lighter-rows',
  servesCodeFrom: 1,
  statements: (t) => [
    `alter table ${t.outbox} alter column "content_hash" drop not null`,
    `alter table ${t.outbox} drop constraint "mail_outbox_message_id_unique"`,
    // SET COMPRESSION is PostgreSQL 14 syntax: run as EXECUTE, it is parsed only where the version check lets it run
    // (inline, PostgreSQL 13 refuses the whole block). A 14+ server built without lz4 raises, and keeps pglz.
    `do $$
      begin
        if current_setting('server_version_num')::int >= 140000 then
          execute 'alter table ${t.outbox} alter column "payload" set compression lz4';
        end if;
      exception when others then
        raise notice 'reliable-mail: lz4 is not available, the outbox payload stays compressed with pglz';
      end $$`,
  ],
};
