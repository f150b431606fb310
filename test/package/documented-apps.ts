// The apps the documentation shows, as the package test builds them: the install lines (README.md's Install, and
// each stack's section of docs/stacks.md) and the files (docs/quick-start.md, docs/stacks.md), taken as they stand.
// The test of the docs' TypeScript reads the same, to know which of their blocks the package test compiles.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export type Stack = 'mikro-orm' | 'typeorm' | 'prisma';

/** A markdown page, or a part of one, named by the page's path in the repository. */
export interface Page {
  name: string;
  text: string;
}

export interface DocumentedPages {
  readme: Page;
  quickStart: Page;
  stacks: Page;
}

/** A file of an app, as a fenced block of a page shows it. */
export interface DocumentedFile {
  page: string;
  text: string;
}

/** Each stack's section of docs/stacks.md. */
const STACK_SECTIONS: Record<Exclude<Stack, 'mikro-orm'>, string> = { typeorm: 'TypeORM', prisma: 'Prisma' };
/** The Quick start's files that an app on another stack keeps; its section replaces or adds the rest. */
const SHARED_FILES = ['orders.controller.ts', 'mail.module.ts', 'mail-audit.ts', 'health.controller.ts'];

export async function readDocumentedPages(repo: string): Promise<DocumentedPages> {
  const read = async (name: string): Promise<Page> => ({ name, text: await readFile(join(repo, name), 'utf8') });
  return {
    readme: await read('README.md'),
    quickStart: await read('docs/quick-start.md'),
    stacks: await read('docs/stacks.md'),
  };
}

/** The text under a heading (`level` 2: `## title`), to the next heading of its level or above. */
function section(page: Page, title: string, level: number): Page {
  const heading = `${'#'.repeat(level)} ${title}`;
  const start = page.text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${page.name} has no "${heading}" section`);
  // From `##` on: a line starting with `# ` is also a comment in an sh block.
  const next = new RegExp(`\\n#{2,${level}} `, 'g');
  next.lastIndex = start + 1;
  const end = next.exec(page.text)?.index;
  return { name: page.name, text: page.text.slice(start, end) };
}

/** A page's own text, before its first section. */
function intro(page: Page): Page {
  const end = page.text.indexOf('\n## ');
  return { name: page.name, text: end < 0 ? page.text : page.text.slice(0, end) };
}

function fencedBlocks(markdown: string, language: string): string[] {
  return [...markdown.matchAll(new RegExp('^```' + language + '\\n([\\s\\S]*?)^```$', 'gm'))].map((match) => match[1]);
}

/** The arguments of each `npm install` in the install block whose first line is `installBlock`, in order. */
export function installCommands(pages: DocumentedPages, stack: Stack, installBlock: string): string[][] {
  const [page, title] = stack === 'mikro-orm' ? [pages.readme, 'Install'] : [pages.stacks, STACK_SECTIONS[stack]];
  const block = fencedBlocks(section(page, title, 2).text, 'sh').find((code) => code.startsWith(`${installBlock}\n`));
  if (!block) throw new Error(`${page.name}'s ${title} section has no sh block starting with "${installBlock}"`);
  return block
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.replace(/#.*$/, '').trim())
    .filter((line) => line.length > 0)
    .map((command) => {
      const [npm, verb, ...args] = command.split(/\s+/);
      if (npm !== 'npm' || verb !== 'install')
        throw new Error(`unexpected command in ${page.name}'s ${title}: ${command}`);
      return args;
    });
}

/**
 * A page's files: each ts block whose first line is `// <name>.ts`, and each prisma block whose first line is
 * `// <path>.prisma`, as it stands; by name (a ts file's, in src/) or path (in the app's folder).
 */
function fileBlocks(page: Page): Map<string, DocumentedFile> {
  const files = new Map<string, DocumentedFile>();
  for (const text of [...fencedBlocks(page.text, 'ts'), ...fencedBlocks(page.text, 'prisma')]) {
    const name = /^\/\/ ([\w./-]+\.(?:ts|prisma))\b/.exec(text)?.[1];
    if (name) files.set(name, { page: page.name, text });
  }
  return files;
}

/** The app's files, by their path in the app's folder: the Quick start's, or a stack's in place of some of them. */
export function appFiles(pages: DocumentedPages, stack: Stack): Map<string, DocumentedFile> {
  const quickStart = fileBlocks(pages.quickStart);
  if (quickStart.size === 0) throw new Error(`${pages.quickStart.name} has no file blocks`);
  let files = quickStart;
  if (stack !== 'mikro-orm') {
    const own = fileBlocks(section(pages.stacks, STACK_SECTIONS[stack], 2));
    if (own.size === 0) throw new Error(`${pages.stacks.name}'s ${STACK_SECTIONS[stack]} section has no file blocks`);
    const main = fileBlocks(intro(pages.stacks)).get('main.ts');
    if (!main) throw new Error(`${pages.stacks.name} has no main.ts before its sections`);
    const missing = SHARED_FILES.filter((name) => !quickStart.has(name));
    if (missing.length > 0) throw new Error(`${pages.quickStart.name} has no ${missing.join(', ')}`);
    files = new Map(SHARED_FILES.map((name) => [name, quickStart.get(name)!]));
    files.set('main.ts', main);
    for (const [name, file] of own) files.set(name, file);
  }
  return new Map([...files].map(([name, file]) => [name.endsWith('.ts') ? join('src', name) : name, file]));
}
