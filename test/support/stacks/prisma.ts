import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, rm, rmdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PrismaPg } from '@prisma/adapter-pg';

/** The part of a generated PrismaClient the tests use (the client is generated at test start, so it has no types). */
export interface PrismaTransactionClient {
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $queryRawUnsafe<R = unknown>(sql: string, ...values: unknown[]): Promise<R[]>;
  order: { create(args: { data: { customer: string; ref?: string } }): Promise<{ id: number }> };
}

export interface PrismaClientLike extends PrismaTransactionClient {
  $transaction<T>(
    work: (tx: PrismaTransactionClient) => Promise<T>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<T>;
  $disconnect(): Promise<void>;
}

type PrismaClientClass = new (options: { adapter: PrismaPg }) => PrismaClientLike;

const SCHEMA = fileURLToPath(new URL('../../stacks/prisma/schema.prisma', import.meta.url));
// Under test/stacks/.scratch/, which .gitignore names (and tsc's globs skip, as a folder starting with a dot).
const SCRATCH = fileURLToPath(new URL('../../stacks/.scratch/', import.meta.url));
const PRISMA_CLI = join(createRequire(import.meta.url).resolve('prisma/package.json'), '..', 'build', 'index.js');

/**
 * Generates the client of test/stacks/prisma/schema.prisma into a folder of its own (test files generating at once
 * do not meet), offline: `prisma generate` looks for the schema engine, which it does not run, and would download
 * it; PRISMA_SCHEMA_ENGINE_BINARY names an existing file instead.
 */
export class GeneratedPrisma {
  private folder: string | null = null;
  private PrismaClient: PrismaClientClass | null = null;

  async generate(): Promise<void> {
    this.folder = join(SCRATCH, `prisma-${randomBytes(6).toString('hex')}`);
    await mkdir(this.folder, { recursive: true });
    const schema = join(this.folder, 'schema.prisma');
    const engine = join(this.folder, 'schema-engine-not-run');
    await copyFile(SCHEMA, schema);
    await writeFile(engine, '', { mode: 0o755 });
    await promisify(execFile)(process.execPath, [PRISMA_CLI, 'generate', '--schema', schema], {
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        PRISMA_SCHEMA_ENGINE_BINARY: engine,
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
        CHECKPOINT_DISABLE: '1',
      },
    });
    const generated = (await import(join(this.folder, 'client', 'index.js'))) as { PrismaClient: PrismaClientClass };
    this.PrismaClient = generated.PrismaClient;
  }

  /** A client on PostgreSQL through @prisma/adapter-pg; `options` are the connection's (`-c TimeZone=…`). */
  client(databaseUrl: string, options?: string): PrismaClientLike {
    if (!this.PrismaClient) throw new Error('the Prisma client is not generated yet');
    return new this.PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl, options }) });
  }

  async dispose(): Promise<void> {
    if (this.folder) await rm(this.folder, { recursive: true, force: true });
    // The scratch folder too, unless another test file's client is still in it.
    await rmdir(SCRATCH).catch(() => undefined);
  }
}

/** Long enough for 20 transactions that queue for the pool's connections and for one another's key. */
export const PRISMA_TRANSACTION_OPTIONS = { maxWait: 20_000, timeout: 30_000 };
