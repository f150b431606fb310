import { literal } from '../schema-session.js';
import type { SchemaVersion } from './schema-version.js';

/**
 * The payload (the mail: ~2 KB of text and more) and the metadata compressed with lz4 rather than pglz, PostgreSQL's
 * default: a row past ~2 KB is compressed as it is written and read back at its claim. On PostgreSQL 15, a batch of
 * 500 mails of 2 KB of prose took 16-20 ms to insert with pglz and 6-9 ms with lz4, stored in 756 and 971 bytes
 * on average (`bench/compression.sql`). Only new values are written so: nothing is rewritten. PostgreSQL 13 and a server built without lz4 keep
 * pglz (the version is recorded all the same, since nothing reads which it is).
 */
export const compressedPayloads: SchemaVersion = {
  version: 7,
  name: 'compressed-payloads',
  servesCodeFrom: 1,
  statements: (t) => [
    `do $$
    begin
      if exists (
        select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)
      ) then
        -- In EXECUTE: PostgreSQL 13 would refuse the syntax itself.
        execute ${literal(`alter table ${t.outbox} alter column "payload" set compression lz4, alter column "metadata" set compression lz4`)};
      end if;
    end $$`,
  ],
};
