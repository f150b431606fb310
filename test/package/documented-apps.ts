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
/**
 * The Quick start's files that an app on another stack keeps (its section replaces or adds the rest): the shared
 * code, the configuration files, and the mail templates its mail.module.ts reads. The jest test and its config are
 * the MikroORM app's (the test migrates with MikroORM).
 */
const SHARED_FILES = [
  'src/orders.controller.ts',
  'src/mail.module.ts',
  'src/mail-audit.ts',
  'src/health.controller.ts',
  'tsconfig.json',
  'tsconfig.build.json',
  '.env',
];
const SHARED_FOLDERS = ['mail-templates/'];

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

/** Where a file a block names goes in the app's folder: TypeScript in src/, but the tests; anything else at the top. */
const appPath = (name: string) => (name.endsWith('.ts') && !name.startsWith('test/') ? join('src', name) : name);

/**
 * A page's files, by their path in the app's folder:
 * - each ts, js, jsonc or prisma block whose first line is a comment naming a file (`// app.module.ts: …`,
 *   `// test/app.e2e-spec.ts`, `// tsconfig.json: …`, `// prisma/schema.prisma`), as it stands;
 * - the `.env` block (an sh block whose first line is `# .env`): its keys, the package test's values taking the
 *   place of the page's (envWithValues);
 * - the files an sh block makes with `cat > <path> <<'EOF'` (a folder of templates): the block may hold only
 *   those, `mkdir -p` and comments, so that the files are all it does.
 */
function fileBlocks(page: Page): Map<string, DocumentedFile> {
  const files = new Map<string, DocumentedFile>();
  const add = (name: string, text: string) => {
    const path = appPath(name);
    if (files.has(path)) throw new Error(`${page.name} shows ${path} twice`);
    files.set(path, { page: page.name, text });
  };
  for (const language of ['ts', 'js', 'jsonc', 'prisma']) {
    for (const text of fencedBlocks(page.text, language)) {
      const name = /^\/\/ ([\w./-]+\.(?:ts|mjs|json|prisma))\b/.exec(text)?.[1];
      if (name) add(name, text);
    }
  }
  for (const text of fencedBlocks(page.text, 'sh')) {
    if (text.startsWith('# .env')) add('.env', text);
    else if (/<<'EOF'$/m.test(text)) for (const [name, content] of heredocFiles(page, text)) add(name, content);
  }
  return files;
}

/** The files of an sh block made of `mkdir -p`, comments and `cat > <path> <<'EOF'` … `EOF`, by path. */
function heredocFiles(page: Page, block: string): Map<string, string> {
  const files = new Map<string, string>();
  const lines = block.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    const heredoc = /^cat > ([\w./-]+) <<'EOF'$/.exec(line);
    if (heredoc) {
      const end = lines.indexOf('EOF', index + 1);
      if (end < 0) throw new Error(`${page.name}: the heredoc of ${heredoc[1]} has no EOF line`);
      files.set(heredoc[1], `${lines.slice(index + 1, end).join('\n')}\n`);
      index = end;
    } else if (!/^(#.*|mkdir -p [\w./ -]+|)$/.test(line)) {
      throw new Error(`${page.name}: a block that makes files also runs "${line}", which the package test would not`);
    }
  }
  return files;
}

/** The page's `.env` with the package test's values; a key the test has no value for is an error. */
export function envWithValues(file: DocumentedFile, values: Record<string, string>): string {
  return file.text.replace(/^([A-Z_]+)=.*$/gm, (_, key: string) => {
    if (!(key in values)) throw new Error(`${file.page}'s .env sets ${key}, which the package test has no value for`);
    return `${key}=${values[key]}`;
  });
}

/** The app's files, by their path in the app's folder: the Quick start's, or a stack's in place of some of them. */
export function appFiles(pages: DocumentedPages, stack: Stack): Map<string, DocumentedFile> {
  const quickStart = fileBlocks(pages.quickStart);
  if (quickStart.size === 0) throw new Error(`${pages.quickStart.name} has no file blocks`);
  if (stack === 'mikro-orm') return quickStart;
  const own = fileBlocks(section(pages.stacks, STACK_SECTIONS[stack], 2));
  if (own.size === 0) throw new Error(`${pages.stacks.name}'s ${STACK_SECTIONS[stack]} section has no file blocks`);
  const main = fileBlocks(intro(pages.stacks)).get('src/main.ts');
  if (!main) throw new Error(`${pages.stacks.name} has no main.ts before its sections`);
  const missing = SHARED_FILES.filter((path) => !quickStart.has(path));
  if (missing.length > 0) throw new Error(`${pages.quickStart.name} has no ${missing.join(', ')}`);
  const shared = [...quickStart].filter(
    ([path]) => SHARED_FILES.includes(path) || SHARED_FOLDERS.some((folder) => path.startsWith(folder)),
  );
  return new Map([...shared, ['src/main.ts', main], ...own]);
}
