// The package test (`npm run test:package`): what a new user does with the npm package. It packs the library, makes
// an app in an empty temporary folder with a package.json of its own (no workspace, no path alias: `npm init` with
// the Quick start's `type`), writes the documented files there as they stand, runs the documented install lines
// against the registry, type-checks the app and its tests and builds it. The Quick start's app then runs its own jest
// test (the testing utilities, on a database of its own). Each app is started against the PostgreSQL in DATABASE_URL
// and an SMTP server in this process, configured by nothing but its .env (the page's, with this test's values):
// an order's email arrives, rendered from the template files; the preview page shows it; an invalid address answers
// 400 and an order repeated with its Idempotency-Key 409. Then `npm ci --omit=dev` and the same again: nothing the
// app loads may be a dev dependency.
//
// The apps (documented-apps.ts reads them): the Quick start's (docs/quick-start.md), on MikroORM, once per supported
// NestJS major (nestjs-12, nestjs-11), installed by README.md's Install lines; and the TypeORM and Prisma apps of
// docs/stacks.md (typeorm, prisma: NestJS 12, ES modules, Node 24), which have no MikroORM package installed and make
// reliable-mail's schema with `npx reliable-mail migrate`, as their deploy would.
//
//   npm run test:package                 every variant
//   npm run test:package -- typeorm      the ones named
//
// KEEP_PACKAGE_TEST=1 keeps the temporary folder (it is kept anyway when a variant fails).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { createTestDatabase, withClient } from '../support/test-database.js';
import { findFreePort } from '../../apps/demo/local/free-port.js';
import {
  appFiles,
  type DocumentedFile,
  type DocumentedPages,
  envWithValues,
  installCommands,
  readDocumentedPages,
  type Stack,
} from './documented-apps.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PACKAGE_DIR = join(REPO, 'libs/reliable-mail');
const PACKAGE_NAME = '@reliable-mail/nestjs';
const START_TIMEOUT_MS = 60_000;
/** One /health request's bound while the app starts: a request that hangs is itself what the failure should say. */
const HEALTH_REQUEST_TIMEOUT_MS = 5_000;
const MAIL_TIMEOUT_MS = 30_000;
const JEST_TIMEOUT_MS = 180_000;

interface Variant {
  name: string;
  /** MikroORM: the Quick start's app; the others: the one of their section of docs/stacks.md. */
  stack: Stack;
  /** Its install block (in README.md's Install, or in its stack's section): the one whose first line is this. */
  installBlock: string;
  /** The app's package.json `type`: Nest 11 apps are mostly CommonJS, which loads the package with require(). */
  moduleType: 'module' | 'commonjs';
  /** The Node the app runs on, when not this one: the oldest the package's `engines` admits. */
  node?: string;
}

const VARIANTS: Variant[] = [
  { name: 'nestjs-12', stack: 'mikro-orm', installBlock: '# NestJS 12', moduleType: 'module' },
  { name: 'nestjs-11', stack: 'mikro-orm', installBlock: '# NestJS 11', moduleType: 'commonjs', node: '22.17.0' },
  { name: 'typeorm', stack: 'typeorm', installBlock: '# TypeORM', moduleType: 'module' },
  { name: 'prisma', stack: 'prisma', installBlock: '# Prisma', moduleType: 'module' },
];

/**
 * What the apps read from their .env, taken out of the environment they run in: a variable of the environment would
 * win over the file's. NODE_ENV too, which the preview refuses to start with as production.
 */
const APP_CONFIGURATION = ['DATABASE_URL', 'SMTP_URL', 'PORT', 'NODE_ENV'];

/** This process's environment without the apps' configuration, with `env` added. */
function environment(env: Record<string, string> = {}): Record<string, string | undefined> {
  const result: Record<string, string | undefined> = { ...process.env };
  for (const name of APP_CONFIGURATION) delete result[name];
  return { ...result, ...env };
}

const log = (message: string) => console.log(`[package test] ${message}`);

const nameOf = (spec: string) => spec.replace(/^(@?[^@]+)@.*$/, '$1');

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
}

function exited(child: ChildProcess): Promise<Finished> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Runs a command to its end (killed after `timeoutMs`, when given); its output is shown when it fails. */
async function run(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs?: number,
): Promise<string> {
  const child = spawn(command, args, { cwd, env: environment(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const { code, signal } = await exited(child);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${signal ?? code}) in ${cwd}:\n${output}`);
  return output;
}

async function pack(destination: string): Promise<string> {
  await run('npm', ['pack', '--pack-destination', destination], PACKAGE_DIR);
  const tarball = (await readdir(destination)).find((file) => file.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack left no tarball in ${destination}`);
  return join(destination, tarball);
}

/** An app's documented files: the .env, which each start writes with its values (writeEnv), and whether it has tests. */
interface CreatedApp {
  env: DocumentedFile;
  hasTests: boolean;
}

async function createApp(dir: string, variant: Variant, docs: DocumentedPages, tarball: string): Promise<CreatedApp> {
  const files = appFiles(docs, variant.stack);
  const env = files.get('.env');
  if (!env) throw new Error(`${docs.quickStart.name} shows no .env`);
  for (const [path, { text }] of files) {
    if (path === '.env') continue;
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  // What `npm init -y` and, for an ES module app, `npm pkg set type=module` make, less what npm fills in.
  const manifest = { name: `reliable-mail-package-test-${variant.name}`, private: true, type: variant.moduleType };
  await writeFile(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

  for (const args of installCommands(docs, variant.stack, variant.installBlock)) {
    const specs = args.map((arg) => (nameOf(arg) === PACKAGE_NAME ? tarball : arg));
    log(`${variant.name}: npm install ${specs.join(' ')}`);
    const output = await run('npm', ['install', '--no-audit', '--no-fund', ...specs], dir);
    // npm resolves peers that do not fit with a warning only (and --legacy-peer-deps would hide it): a warning
    // here means the install lines and the peer ranges disagree.
    const peerWarnings = output.split('\n').filter((line) => /^npm warn/i.test(line) && /peer|ERESOLVE/i.test(line));
    if (peerWarnings.length > 0) throw new Error(`npm install warned about peers:\n${peerWarnings.join('\n')}`);
  }
  if (variant.stack !== 'mikro-orm') await assertNoMikroOrm(dir);
  return { env, hasTests: [...files.keys()].some((path) => path.startsWith('test/')) };
}

/** MikroORM is an optional peer: an app on another stack must not get it (anywhere in its tree). */
async function assertNoMikroOrm(dir: string): Promise<void> {
  const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, unknown>;
  };
  const found = Object.keys(lock.packages).filter((path) => /(^|\/)node_modules\/@mikro-orm\//.test(path));
  if (await exists(join(dir, 'node_modules/@mikro-orm'))) found.push('node_modules/@mikro-orm');
  if (found.length > 0) throw new Error(`a MikroORM package was installed:\n${found.join('\n')}`);
}

/**
 * `npx prisma generate`, offline: it looks for Prisma's schema engine, which it does not run, and would download it;
 * PRISMA_SCHEMA_ENGINE_BINARY names an existing file instead (as test/support/stacks/prisma.ts does).
 */
async function generatePrismaClient(dir: string, root: string): Promise<void> {
  const engine = join(root, 'schema-engine-not-run');
  await writeFile(engine, '', { mode: 0o755 });
  await run('npx', ['--no', 'prisma', 'generate'], dir, {
    NODE_OPTIONS: '',
    PRISMA_SCHEMA_ENGINE_BINARY: engine,
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    CHECKPOINT_DISABLE: '1',
  });
}

/**
 * The package's CLI, as a deploy runs it (`--no`: the package's own bin, never one npx would fetch), and what it
 * says it did.
 */
async function migrateWithCli(dir: string, databaseUrl: string, expected: RegExp): Promise<void> {
  const output = await run('npx', ['--no', 'reliable-mail', 'migrate'], dir, {
    DATABASE_URL: databaseUrl,
    NODE_OPTIONS: '',
  });
  if (!expected.test(output)) throw new Error(`npx reliable-mail migrate did not say ${expected}:\n${output}`);
  log(`  ${output.trim()}`);
}

/**
 * The Prisma app's table. Prisma's `migrate` would make it, but it runs Prisma's native schema engine, which its CLI
 * downloads, and which cannot be downloaded here; so this is the SQL a migration of the documented schema would hold.
 */
async function createPrismaOrdersTable(databaseUrl: string): Promise<void> {
  await withClient(databaseUrl, (client) =>
    client.query(`
      create table "orders" (
        "id" serial primary key,
        "customer_email" text not null,
        "total" numeric(12, 2) not null
      )`),
  );
}

/** A Node binary of the given version from the npm registry, kept in .tools/ as scripts/node24.sh keeps Node 24. */
async function nodeBinary(version: string): Promise<string> {
  const prefix = join(REPO, '.tools', `node-${version}`);
  const binary = join(prefix, 'node_modules', `node-${process.platform}-${process.arch}`, 'bin', 'node');
  if (!(await exists(binary))) {
    log(`installing Node ${version} into ${prefix}`);
    await run(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-save',
        '--no-audit',
        '--no-fund',
        `node-${process.platform}-${process.arch}@${version}`,
      ],
      REPO,
    );
  }
  return binary;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

class App {
  readonly output: string[] = [];
  private readonly child: ChildProcess;

  /** The built app, configured by its .env alone. */
  constructor(
    dir: string,
    node: string,
    readonly baseUrl: string,
  ) {
    this.child = spawn(node, ['dist/main.js'], {
      cwd: dir,
      // Plain log lines, without colour codes, to search.
      env: environment({ NODE_OPTIONS: '', NO_COLOR: '1' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffered = '';
    const collect = (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      this.output.push(...lines);
    };
    this.child.stdout!.on('data', collect);
    this.child.stderr!.on('data', collect);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  failure(what: string): Error {
    return new Error(`${what}; the app's output:\n  ${this.output.join('\n  ')}`);
  }

  async waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw this.failure(`the app exited while waiting for ${what}`);
      const done = await Promise.resolve()
        .then(check)
        .catch(() => false);
      if (done) return;
      if (Date.now() > deadline) throw this.failure(`no ${what} after ${timeoutMs / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** SIGTERM, as a deployment stops it: the shutdown hooks run, and Nest then ends the process by the signal. */
  async stop(): Promise<void> {
    if (!this.running) throw this.failure('the app was no longer running');
    this.child.kill('SIGTERM');
    const { code, signal } = await exited(this.child);
    if (code !== 0 && signal !== 'SIGTERM') throw this.failure(`the app ended with ${signal ?? code} on SIGTERM`);
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}

/** The page's .env, with this test's database, SMTP server and port. */
async function writeEnv(dir: string, env: DocumentedFile, values: Record<string, string>): Promise<void> {
  await writeFile(join(dir, '.env'), envWithValues(env, values));
}

const postOrder = (baseUrl: string, order: { email: string; total: number }, requestKey?: string) =>
  fetch(`${baseUrl}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(requestKey ? { 'idempotency-key': requestKey } : {}) },
    body: JSON.stringify(order),
  });

/** An answer's status and JSON body, or the app's failure when the status is not the one expected. */
async function expectAnswer(app: App, what: string, response: Response, status: number) {
  const text = await response.text();
  if (response.status !== status) throw app.failure(`${what} answered ${response.status}, not ${status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * Starts the built app with the page's .env, places an order over HTTP and waits for its email at the SMTP server,
 * rendered from the template files (the layout's partial in it); sees it on the preview page; then an invalid
 * address (400) and an order repeated with its Idempotency-Key (409).
 */
async function placeOrderAndReceiveMail(
  dir: string,
  node: string,
  env: DocumentedFile,
  databaseUrl: string,
  smtp: SmtpTestServer,
  email: string,
) {
  const port = await findFreePort(3000 + Math.floor(Math.random() * 1000));
  await writeEnv(dir, env, { DATABASE_URL: databaseUrl, SMTP_URL: smtp.url, PORT: String(port) });
  const app = new App(dir, node, `http://127.0.0.1:${port}`);
  try {
    // The last answer (or error) is kept for the failure: a start that never became healthy once gave nothing else.
    let lastHealth = 'none';
    await app
      .waitUntil('answer on /health', START_TIMEOUT_MS, async () => {
        try {
          const answer = await fetch(`${app.baseUrl}/health`, {
            signal: AbortSignal.timeout(HEALTH_REQUEST_TIMEOUT_MS),
          });
          lastHealth = `${answer.status} ${await answer.text()}`;
          return answer.ok;
        } catch (error) {
          lastHealth = String(error);
          return false;
        }
      })
      .catch((error: Error) => {
        throw new Error(`${error.message}\nthe last answer of /health: ${lastHealth}`);
      });

    const placed = await postOrder(app.baseUrl, { email, total: 25 });
    const order = (await expectAnswer(app, 'POST /orders', placed, 201)) as { id: number };
    const subject = `Order ${order.id} confirmed`;
    let messageId: string | null = null;
    await app.waitUntil(`email "${subject}" to ${email}`, MAIL_TIMEOUT_MS, () => {
      const mail = smtp.received.find(
        (message) => message.recipients.includes(email) && message.raw.includes(`\r\nSubject: ${subject}\r\n`),
      );
      if (mail && !(mail.raw.includes('Total: 25.00') && mail.raw.includes('The Shop team')))
        throw app.failure(`the email has not the template's html, layout and partial:\n${mail.raw}`);
      messageId = mail?.messageId ?? null;
      return messageId !== null;
    });
    await app.waitUntil(`MailAudit's line for ${messageId}`, MAIL_TIMEOUT_MS, () =>
      app.output.some((line) => line.includes(`sent as ${messageId}`)),
    );

    // The newest mail is the preview's home page, rendered.
    const preview = await fetch(`${app.baseUrl}/mail-preview`);
    const page = await preview.text();
    if (preview.status !== 200 || !page.includes(subject))
      throw app.failure(`GET /mail-preview answered ${preview.status} without "${subject}":\n${page}`);

    const invalid = await expectAnswer(
      app,
      'POST /orders with an invalid address',
      await postOrder(app.baseUrl, { email: 'ann@', total: 25 }),
      400,
    );
    if (invalid.error !== 'MailValidationError' || invalid.field !== 'to')
      throw app.failure(`the 400 is not a MailValidationError of to: ${JSON.stringify(invalid)}`);
    const requestKey = randomUUID();
    await expectAnswer(app, 'POST /orders', await postOrder(app.baseUrl, { email, total: 10 }, requestKey), 201);
    const repeated = await expectAnswer(
      app,
      'POST /orders repeated with its Idempotency-Key',
      await postOrder(app.baseUrl, { email, total: 10 }, requestKey),
      409,
    );
    if (repeated.error !== 'IdempotencyConflictError')
      throw app.failure(`the 409 is not an IdempotencyConflictError: ${JSON.stringify(repeated)}`);

    const health = await fetch(`${app.baseUrl}/health`);
    const report = (await health.json()) as { status?: string; info?: { mail?: { status?: string } } };
    if (health.status !== 200 || report.info?.mail?.status !== 'up') {
      throw app.failure(`GET /health answered ${health.status}: ${JSON.stringify(report)}`);
    }
    await app.stop();
    const errors = app.output.filter((line) => /\bERROR\b/.test(line));
    if (errors.length > 0) throw app.failure(`the app logged errors:\n  ${errors.join('\n  ')}`);
    log(
      `  order ${order.id}: email ${messageId} arrived from the template files, MailAudit heard it, the preview ` +
        'shows it; 400 for an invalid address, 409 for a repeated order; /health is up, stopped cleanly',
    );
  } finally {
    app.kill();
  }
}

/**
 * The app's own jest test, as the Quick start runs it: on its database (the environment's DATABASE_URL winning over
 * the .env's), in jest's ES module mode, on the app's Node. Answers jest's count of tests.
 */
async function runAppTests(dir: string, node: string, env: DocumentedFile, smtp: SmtpTestServer): Promise<string> {
  const database = await createTestDatabase();
  try {
    // The .env as a developer has it: the app's database, which the test's environment overrides.
    await writeEnv(dir, env, {
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/not-the-tests',
      SMTP_URL: smtp.url,
      PORT: '3000',
    });
    const output = await run(
      node,
      ['node_modules/jest/bin/jest.js', '--ci'],
      dir,
      { DATABASE_URL: database.url, NODE_OPTIONS: '--experimental-vm-modules', NO_COLOR: '1' },
      JEST_TIMEOUT_MS,
    );
    const summary = output.split('\n').filter((line) => /^Tests:/.test(line));
    if (!/^Tests: +\d+ passed, \d+ total$/.test(summary.join('')))
      throw new Error(`the app's jest test did not pass as a whole:\n${output}`);
    return summary[0].replace(/^Tests: +/, '');
  } finally {
    await database.drop();
  }
}

/**
 * The app skips checking libraries' declarations, as Nest's project template does, which would also hide a type the
 * package's own declarations cannot resolve (a missing `@types/…` dependency); so they are checked once more on their
 * own. Other packages' declarations may fail that check (those of postgres-interval, which MikroORM's PostgreSQL
 * driver brings, use Temporal types the app's `lib` does not include); only the package's own errors count.
 */
async function checkDeclarations(dir: string): Promise<void> {
  const output = await run(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noEmit', '--skipLibCheck', 'false'],
    dir,
  ).catch((error: Error) => error.message);
  const errors = output.split('\n').filter((line) => line.startsWith(`node_modules/${PACKAGE_NAME}/`));
  if (errors.length > 0) throw new Error(`the package's declarations do not type-check:\n${errors.join('\n')}`);
}

/**
 * `npm ci --omit=dev`, and the app's dev dependencies gone. npm keeps a dev dependency that a production package names
 * as an optional peer (`devOptional` in the lockfile): @prisma/client names prisma and typescript, so a Prisma app's
 * production install keeps its whole dev tool chain. There `--omit=optional` is added, which removes them, so that
 * the run after it still shows that the built app loads no dev dependency.
 */
async function installForProduction(dir: string): Promise<void> {
  await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], dir);
  if (!(await exists(join(dir, 'node_modules/typescript')))) return;
  const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { devOptional?: boolean }>;
  };
  if (!lock.packages['node_modules/typescript']?.devOptional)
    throw new Error('npm ci --omit=dev left the dev dependencies installed');
  log('  npm ci --omit=dev kept the dev dependencies a production package names as optional peers; --omit=optional');
  await run('npm', ['ci', '--omit=dev', '--omit=optional', '--no-audit', '--no-fund'], dir);
  if (await exists(join(dir, 'node_modules/typescript')))
    throw new Error('npm ci --omit=dev --omit=optional left the dev dependencies installed');
}

async function runVariant(
  variant: Variant,
  root: string,
  docs: DocumentedPages,
  tarball: string,
  smtp: SmtpTestServer,
) {
  const started = Date.now();
  const seconds = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
  const dir = join(root, variant.name);
  await mkdir(dir);
  const { env, hasTests } = await createApp(dir, variant, docs, tarball);
  log(`${variant.name}: installed (${seconds()}): ${await installedVersions(dir, variant)}`);

  // The generated client is TypeScript under src/, compiled into dist/ with the app: the production install, which
  // removes the prisma CLI, leaves it.
  if (variant.stack === 'prisma') await generatePrismaClient(dir, root);
  // The app and its tests, as the Quick start's tsconfig.json takes them; then what runs, into dist/.
  await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noEmit'], dir);
  await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], dir);
  await checkDeclarations(dir);
  log(`${variant.name}: type-checked and built (${seconds()})`);

  const node = variant.node ? await nodeBinary(variant.node) : process.execPath;
  log(`${variant.name}: the app runs on Node ${variant.node ?? process.versions.node}`);
  if (hasTests) {
    const tests = await runAppTests(dir, node, env, smtp);
    log(`${variant.name}: the app's jest test: ${tests} (${seconds()})`);
  }
  const database = await createTestDatabase();
  try {
    // The MikroORM app migrates in main.ts; the others' schema comes first, from the CLI (then TypeORM's
    // synchronize makes the app's table at start).
    if (variant.stack !== 'mikro-orm') await migrateWithCli(dir, database.url, /migrated from version 0 to \d+/);
    if (variant.stack === 'prisma') await createPrismaOrdersTable(database.url);
    await placeOrderAndReceiveMail(dir, node, env, database.url, smtp, `${variant.name}@example.com`);
    await installForProduction(dir);
    log(`${variant.name}: npm ci --omit=dev (${seconds()})`);
    // The bin runs on the production install too, and a second run changes nothing.
    if (variant.stack !== 'mikro-orm') await migrateWithCli(dir, database.url, /nothing to do/);
    await placeOrderAndReceiveMail(dir, node, env, database.url, smtp, `${variant.name}-production@example.com`);
  } finally {
    await database.drop();
  }
  log(`${variant.name}: passed in ${seconds()}`);
}

const STACK_PACKAGES: Record<Stack, string[]> = {
  'mikro-orm': ['@mikro-orm/core', '@mikro-orm/nestjs'],
  typeorm: ['typeorm', '@nestjs/typeorm', 'pg'],
  prisma: ['prisma', '@prisma/client', '@prisma/adapter-pg', 'pg'],
};

async function installedVersions(dir: string, variant: Variant): Promise<string> {
  const names = [
    '@nestjs/core',
    '@nestjs/config',
    '@nestjs/schedule',
    '@nestjs/event-emitter',
    '@nestjs/terminus',
    ...STACK_PACKAGES[variant.stack],
  ];
  const versions = await Promise.all(
    names.map(async (name) => {
      const manifest = JSON.parse(await readFile(join(dir, 'node_modules', name, 'package.json'), 'utf8')) as {
        version: string;
      };
      return `${name} ${manifest.version}`;
    }),
  );
  return versions.join(', ');
}

/** The bound on what the console ships, its views and assets together, gzipped file by file. */
const CONSOLE_MAX_GZIPPED_BYTES = 300 * 1024;

/**
 * The console's share of the package as a browser and a server get it: every built file of `dist/console`,
 * gzipped one by one (the page's stylesheet and script are strings in them, served by the console's routes).
 */
async function reportConsoleSize(): Promise<void> {
  const folder = join(PACKAGE_DIR, 'dist/console');
  const files = (await readdir(folder, { recursive: true })).filter((file) => file.endsWith('.js'));
  let raw = 0;
  let gzipped = 0;
  for (const file of files) {
    const content = await readFile(join(folder, file));
    raw += content.length;
    gzipped += gzipSync(content, { level: 9 }).length;
  }
  log(
    `the console: ${files.length} files, ${raw} bytes, ${gzipped} bytes gzipped (at most ${CONSOLE_MAX_GZIPPED_BYTES})`,
  );
  if (files.length === 0 || gzipped > CONSOLE_MAX_GZIPPED_BYTES) {
    throw new Error(`the console ships ${gzipped} bytes gzipped in ${files.length} files`);
  }
}

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const variants = wanted.length > 0 ? VARIANTS.filter((variant) => wanted.includes(variant.name)) : VARIANTS;
  if (variants.length === 0)
    throw new Error(`no variant named ${wanted.join(', ')}; there are ${VARIANTS.map((v) => v.name).join(', ')}`);
  if (!process.env.DATABASE_URL)
    throw new Error('the package test needs DATABASE_URL (a PostgreSQL server it may create databases on)');

  const docs = await readDocumentedPages(REPO);
  const root = await mkdtemp(join(tmpdir(), 'reliable-mail-package-'));
  const smtp = new SmtpTestServer();
  await smtp.listen();
  let passed = false;
  try {
    const tarball = await pack(root);
    log(`packed ${tarball}`);
    await reportConsoleSize();
    for (const variant of variants) await runVariant(variant, root, docs, tarball, smtp);
    passed = true;
  } finally {
    await smtp.close();
    if (passed && !process.env.KEEP_PACKAGE_TEST) await rm(root, { recursive: true, force: true });
    else log(`the apps are in ${root}`);
  }
}

await main();
