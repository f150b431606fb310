import { createRequire } from 'node:module';

/** This package's version, for messages: the same two folders up from src/ and from dist/. */
export const PACKAGE_VERSION: string = (createRequire(import.meta.url)('../../package.json') as { version: string })
  .version;
