import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import ts from 'typescript';
import { appFiles, readDocumentedPages, type Stack } from './package/documented-apps.js';

/**
 * Every TypeScript block of README.md and docs/*.md type-checks against the library and this repository's packages,
 * unless its first line marks it a fragment (`// fragment: <why>`) or it is a file of an app the package test
 * compiles, with the packages its install lines add (docs/testing.md says so to whoever writes a block).
 */
const REPO = fileURLToPath(new URL('../', import.meta.url));
/**
 * Where the blocks are compiled, as files that exist only in the compiler host: inside the repository, so that
 * `@reliable-mail/nestjs` and every package resolve from its node_modules, and ES modules, as its package.json says.
 */
const VIRTUAL_ROOT = join(REPO, '.docs-typescript');
const FRAGMENT = /^\/\/ fragment: (\S.*)$/;
/** A block whose first line names a file (`// mail.module.ts: …`) is that file, beside the other files of its page. */
const FILE_NAME = /^\/\/ ([\w.-]+\.ts)\b/;
const STACKS: Stack[] = ['mikro-orm', 'typeorm', 'prisma'];

interface CodeBlock {
  page: string;
  /** The page's line of the block's first line of code (1-based). */
  line: number;
  text: string;
}

/** The ts and typescript fenced blocks of a page, a list item's indentation taken off. */
function typescriptBlocks(page: string, markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let open: { indent: string; typescript: boolean; line: number; lines: string[] } | null = null;
  markdown.split('\n').forEach((text, index) => {
    const fence = /^(\s*)```(\w*)\s*$/.exec(text);
    if (!open) {
      if (fence)
        open = { indent: fence[1], typescript: /^(ts|typescript)$/.test(fence[2]), line: index + 2, lines: [] };
    } else if (fence && fence[2] === '') {
      if (open.typescript) blocks.push({ page, line: open.line, text: `${open.lines.join('\n')}\n` });
      open = null;
    } else {
      open.lines.push(text.startsWith(open.indent) ? text.slice(open.indent.length) : text);
    }
  });
  return blocks;
}

async function documentationBlocks(): Promise<CodeBlock[]> {
  const pages = ['README.md', ...(await readdir(join(REPO, 'docs'))).filter((name) => name.endsWith('.md')).sort()];
  const blocks: CodeBlock[] = [];
  for (const page of pages) {
    const name = page === 'README.md' ? page : `docs/${page}`;
    blocks.push(...typescriptBlocks(name, await readFile(join(REPO, name), 'utf8')));
  }
  return blocks;
}

/** The TypeScript blocks the package test takes as its apps' files, by page and text. */
async function packageTestFiles(): Promise<Set<string>> {
  const pages = await readDocumentedPages(REPO);
  const files = new Set<string>();
  for (const stack of STACKS) {
    for (const [path, file] of appFiles(pages, stack))
      if (path.endsWith('.ts')) files.add(`${file.page}\n${file.text}`);
  }
  return files;
}

/** The repository's compiler options, but for unused names, which a block that shows a call may well have. */
function compilerOptions(): ts.CompilerOptions {
  const { config } = ts.readConfigFile(join(REPO, 'tsconfig.json'), (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, REPO);
  return {
    ...options,
    noEmit: true,
    declaration: false,
    sourceMap: false,
    noUnusedLocals: false,
    noUnusedParameters: false,
    // A block without an import is a module too: the blocks' declarations never meet.
    moduleDetection: ts.ModuleDetectionKind.Force,
  };
}

/**
 * Where a block is compiled: a folder per page, so that the blocks that name their files import each other as
 * `./<name>.js`; a name taken twice on a page, and a block that names none, go by the block's line.
 */
function virtualPaths(blocks: CodeBlock[]): Map<string, CodeBlock> {
  const fileName = (block: CodeBlock) => FILE_NAME.exec(block.text)?.[1];
  const taken = (block: CodeBlock) =>
    blocks.filter((other) => other.page === block.page && fileName(other) === fileName(block)).length > 1;
  return new Map(
    blocks.map((block) => {
      const folder = join(VIRTUAL_ROOT, block.page.replace(/[/.]/g, '-'));
      const name = fileName(block);
      return [
        name && !taken(block) ? join(folder, name) : join(folder, `line-${block.line}`, name ?? 'block.ts'),
        block,
      ];
    }),
  );
}

/** Type-checks the blocks as one program, a file each; answers the errors, each at its page and line. */
function typeCheck(blocks: CodeBlock[]): string[] {
  const files = virtualPaths(blocks);
  const options = compilerOptions();
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile: read, directoryExists, getSourceFile } = host;
  host.fileExists = (path) => files.has(path) || fileExists.call(host, path);
  host.readFile = (path) => files.get(path)?.text ?? read.call(host, path);
  host.directoryExists = (path) =>
    [...files.keys()].some((file) => dirname(file).startsWith(path)) || (directoryExists?.call(host, path) ?? false);
  host.getSourceFile = (path, languageVersion, ...rest) => {
    const block = files.get(path);
    return block
      ? ts.createSourceFile(path, block.text, languageVersion)
      : getSourceFile.call(host, path, languageVersion, ...rest);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const errors = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()].map(
    (diagnostic) => `the compiler: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`,
  );
  for (const [path, block] of files) {
    const source = program.getSourceFile(path)!;
    for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const line = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line;
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
      errors.push(
        `${block.page}:${block.line + line} (the block at line ${block.line}): TS${diagnostic.code} ${message}`,
      );
    }
  }
  return errors;
}

describe('the TypeScript blocks of README.md and docs/', () => {
  it('type-check, unless a fragment or a file the package test compiles', async () => {
    const blocks = await documentationBlocks();
    const compiledByPackageTest = await packageTestFiles();
    const fragments = blocks.filter((block) => FRAGMENT.test(block.text.split('\n')[0]));
    const ofPackageTest = blocks.filter((block) => compiledByPackageTest.has(`${block.page}\n${block.text}`));
    const checked = blocks.filter((block) => !fragments.includes(block) && !ofPackageTest.includes(block));

    console.log(
      [
        `${blocks.length} TypeScript blocks in README.md and docs/: ${checked.length} type-checked here, ` +
          `${ofPackageTest.length} compiled by the package test (its apps' files), ${fragments.length} fragments:`,
        ...fragments.map((block) => `  ${block.page}:${block.line} ${FRAGMENT.exec(block.text.split('\n')[0])![1]}`),
      ].join('\n'),
    );
    expect(checked.length).toBeGreaterThan(0);
    expect(typeCheck(checked)).toEqual([]);
  });
});
