import { defineConfig } from 'drizzle-kit';

/**
 * An app's drizzle-kit config as its README would have it: no schemaFilter or tablesFilter, so drizzle-kit's defaults
 * (schema `public`) apply. The test runs drizzle-kit with this folder as its working directory and names the database
 * and the migrations folder in the environment.
 */
export default defineConfig({
  dialect: 'postgresql',
  schema: './drizzle-schema.ts',
  out: process.env.SCHEMA_TOOLING_OUT ?? './drizzle-out',
  dbCredentials: { url: process.env.SCHEMA_TOOLING_DATABASE_URL ?? '' },
});
