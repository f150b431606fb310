import type { OutboxTables } from '../outbox-tables.js';

/**
 * One version of reliable-mail's schema: the statements that bring the version before it to this one, run in one
 * transaction. `servesCodeFrom` names the oldest code this version still serves, as the newest version that code
 * knows: a version that only adds (a column the old code does not read, an index) serves the code before it, so a
 * rolling deploy migrates first and replaces the code after, and a rollback of the code keeps working; one that
 * changes what older code relies on serves only code that knows it.
 */
export interface SchemaVersion {
  readonly version: number;
  readonly name: string;
  readonly servesCodeFrom: number;
  readonly statements: (tables: OutboxTables) => readonly string[];
}
