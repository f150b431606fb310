import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { DEFAULT_SCHEMA } from './outbox-tables.js';
import { renderVersionSql, schemaSqlFileName } from './schema-sql.js';
import { SCHEMA_VERSIONS } from './versions/index.js';

const SQL_FOLDER = new URL('../../sql/', import.meta.url);

describe("the package's SQL files", () => {
  it.each(SCHEMA_VERSIONS.map((version) => ({ version, file: schemaSqlFileName(version) })))(
    '$file is what migrate runs for its version (UPDATE_SQL_FILES=1 writes them)',
    ({ version, file }) => {
      const rendered = renderVersionSql(DEFAULT_SCHEMA, version);
      if (process.env.UPDATE_SQL_FILES === '1') writeFileSync(new URL(file, SQL_FOLDER), rendered);
      expect(readFileSync(new URL(file, SQL_FOLDER), 'utf8')).toBe(rendered);
    },
  );
});
