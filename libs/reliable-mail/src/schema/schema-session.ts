/**
 * Where the schema's statements run: a connection in a transaction (the CLI's and the start-up's own), or a MikroORM
 * migration's. Statements carry no parameters (MikroORM's migrations take none in PostgreSQL's `$n` form): what
 * they name is a checked schema name, a version number or a constant of this package, written in as a literal.
 */
export interface SchemaSession {
  run<R = Record<string, unknown>>(sql: string): Promise<R[]>;
}

/** A string as an SQL literal. */
export const literal = (value: string): string => `'${value.replaceAll("'", "''")}'`;
