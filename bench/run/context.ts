// The run's shared state: its deadline, its phases, and the child processes and databases to clean up.
import pg from 'pg';
import { Child, databaseUrl, now, settings } from '../common.js';

export const runStartedAt = now();
export const deadline = runStartedAt + settings.totalTimeoutMs;
export const phases: { phase: string; seconds: number }[] = [];
export const children = new Set<Child>();
export const databases = new Set<string>();
export const admin = new pg.Pool({ connectionString: databaseUrl('postgres'), max: 2 });
export const tag = `${process.pid}`;

export function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The repetition under way, put before each phase's name: `rep 2: `. */
let repetitionLabel = '';

/** Labels the phases that follow with repetition `index` (from 0), or with none. */
export function startRepetition(index: number | null): void {
  repetitionLabel = index === null ? '' : `rep ${index + 1}: `;
}

export async function phase<T>(unlabelled: string, work: () => Promise<T>): Promise<T> {
  const name = `${repetitionLabel}${unlabelled}`;
  const started = now();
  log(`- ${name} ...`);
  try {
    return await work();
  } finally {
    const seconds = (now() - started) / 1000;
    phases.push({ phase: name, seconds: +seconds.toFixed(2) });
    log(`  ${name}: ${seconds.toFixed(1)} s`);
  }
}

export function remainingMs(): number {
  return deadline - now();
}

export function limit(ms: number): number {
  return Math.max(1_000, Math.min(ms, remainingMs()));
}

export async function createDatabase(name: string): Promise<string> {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  databases.add(name);
  return databaseUrl(name);
}

export async function dropDatabase(name: string): Promise<void> {
  await admin.query(`drop database if exists ${name} with (force)`);
  databases.delete(name);
}

export function spawn(name: string, file: string, args: string[]): Child {
  const child = new Child(name, file, args);
  children.add(child);
  child.process.on('exit', () => children.delete(child));
  return child;
}
