import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { basename, join, relative, resolve, sep } from 'node:path';
import type Handlebars from 'handlebars';
import { ReliableMailError, ReliableMailSetupError } from '../errors.js';
import { loadSdk } from '../shared/optional-package.js';
import {
  handlebarsTemplate,
  type HandlebarsLayout,
  type HandlebarsSources,
  layoutLine,
} from './handlebars-template.js';
import { InvalidTemplateError, type MailTemplate } from './mail-template.js';
import { sourceHash } from './source-hash.js';
import { referencesOf, type SourceReferences, unresolvedReferences } from './template-references.js';

export interface FileTemplatesOptions {
  /**
   * The folder of templates. A relative path is resolved from the working directory; prefer an absolute one, such
   * as `join(import.meta.dirname, 'mail-templates')`, and copy the folder into the build (docs/file-templates.md).
   */
  dir: string;
  /** The subfolder of layouts, inside `dir`. @default 'layouts' */
  layouts?: string;
  /** The subfolder of partials, inside `dir`: `partials/orders/line.hbs` is `{{> orders/line}}`. @default 'partials' */
  partials?: string;
  /** The layout of a part whose first line names none (`{{!< name}}`), where it has that part. @default 'main' */
  defaultLayout?: string;
  /**
   * Helpers for every template of the folder. They are code, not sources: a mail enqueued before a deploy renders
   * with the helpers of the instance that sends it, so change a helper only in ways older templates still work with.
   */
  helpers?: Record<string, Handlebars.HelperDelegate>;
  /**
   * Make a reference to a missing parameter throw (a permanent failure of the row) instead of rendering empty. Part
   * of each template's version, as it changes what the template renders.
   */
  strict?: boolean;
  /** Inline the CSS of `<style>` elements into the html with juice (an optional peer dependency). */
  inlineCss?: boolean;
}

/**
 * The shape of `FileTemplateSources` and of the JSON their hash is taken of. A release that changes either numbers
 * its sources anew and makes the versions kept in an older format again without hashing them again: the hash of
 * sources in another shape is not the version they were saved under, and the mails queued with them must still go.
 */
export const SOURCES_FORMAT = 1;

/**
 * What a version of a file template is made of, as `mail_template_source` keeps it: everything that decides what it
 * renders but the helpers. Its hash is the version.
 */
export interface FileTemplateSources {
  /** `SOURCES_FORMAT` when they were saved. */
  format: number;
  /** The template's own files by what follows its name: `subject`, `html` or `mjml`, `text`, `de-AT.subject`. */
  parts: Record<string, string>;
  /** The layouts its parts use, by `<layout>.<html|mjml|text>`. */
  layouts: Record<string, string>;
  /** Every partial of the folder, by name: a template may reach any of them through another. */
  partials: Record<string, string>;
  /** The layout of a part whose first line names none. */
  defaultLayout: string;
  inlineCss: boolean;
  strict: boolean;
}

/** A template loaded from files, versioned by the hash of its sources. */
export interface FileTemplate extends MailTemplate<Record<string, unknown>> {
  readonly version: string;
  readonly sources: FileTemplateSources;
}

/** What shapes a template besides its sources: the folder's options that are code. */
type FolderSettings = Pick<FileTemplatesOptions, 'helpers'>;

const PARTS = ['subject', 'html', 'mjml', 'text'] as const;
type Part = (typeof PARTS)[number];
const FILE_PATTERN =
  'a template file is <name>.<part>.hbs or <name>.<locale>.<part>.hbs, <part> being subject, html, mjml or text';
const EXPECTED =
  'template files such as welcome.subject.hbs with welcome.html.hbs (or welcome.mjml.hbs, welcome.text.hbs), ' +
  'in folders for names such as orders/confirmation';
/** The trap of every app with template files: the build (dist/) holds the compiled code and not the folder. */
const distHint = (dir: string): string =>
  'when the app runs from a build folder (dist/), the folder must be copied there: with the Nest CLI, add ' +
  `"assets": [{ "include": "${basename(dir)}/**/*", "watchAssets": true }] to the compilerOptions of nest-cli.json ` +
  '(see docs/file-templates.md)';

const isPart = (value: string): value is Part => (PARTS as readonly string[]).includes(value);

/** The canonical locale tag of a file name's locale segment, or null when it is none. */
function localeOf(segment: string): string | null {
  try {
    return Intl.getCanonicalLocales(segment)[0] ?? null;
  } catch {
    return null;
  }
}

/** The file's path inside the folder, with `/` on every system. */
const folderPath = (dir: string, file: string): string => relative(dir, file).split(sep).join('/');

/** Whether `path` is `folder` or inside it; both real paths. */
const isInside = (folder: string, path: string): boolean => path === folder || path.startsWith(`${folder}${sep}`);

/**
 * The files under `dir` (hidden ones left out), by their path inside it. A symbolic link is read as what it links
 * to, which must be inside the folder: a target outside would not be what the build copies along with it, and a
 * folder linked from inside itself would be read round and round.
 */
async function filesUnder(dir: string): Promise<Map<string, string>> {
  const root = await realpath(dir);
  const files = new Map<string, string>();
  /** `ancestors`: the real paths of the folders from the root down to `folder`'s parent. */
  const walk = async (folder: string, real: string, ancestors: readonly string[]): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const path = join(folder, entry.name);
      let target = join(real, entry.name);
      let isFile = entry.isFile();
      let isDirectory = entry.isDirectory();
      if (entry.isSymbolicLink()) {
        const linked = await realpath(path).catch(() => null);
        if (linked === null || !isInside(root, linked)) {
          throw new ReliableMailSetupError(
            `fileTemplates: ${path} is a symbolic link to ${linked ?? 'nothing (its target does not exist)'}, ` +
              `not to a file or folder inside ${dir}; copy what it links to into the folder`,
          );
        }
        if (linked === real || ancestors.includes(linked)) {
          throw new ReliableMailSetupError(
            `fileTemplates: ${path} is a symbolic link to ${linked}, a folder it is in: the folder would be read ` +
              'without end',
          );
        }
        const info = await stat(linked);
        [target, isFile, isDirectory] = [linked, info.isFile(), info.isDirectory()];
      }
      if (isFile) files.set(folderPath(dir, path), path);
      else if (isDirectory) await walk(path, target, [...ancestors, real]);
    }
  };
  await walk(dir, root, []);
  return files;
}

interface ParsedFolder {
  /** Each template's parts, by template name. */
  templates: Map<string, Record<string, string>>;
  layouts: Record<string, string>;
  partials: Record<string, string>;
  /** Every source read (parts, layouts and partials), by its file. */
  files: Map<string, string>;
}

/** Reads the folder: its templates' parts, its layouts and its partials. */
async function parseFolder(dir: string, layoutsDir: string, partialsDir: string): Promise<ParsedFolder> {
  const info = await stat(dir).catch(() => null);
  if (!info?.isDirectory()) {
    throw new ReliableMailSetupError(
      `fileTemplates: the folder ${dir} ${info ? 'is not a folder' : 'does not exist'}; it should hold ${EXPECTED}. ` +
        `A relative dir is resolved from the working directory (${process.cwd()}); ${distHint(dir)}`,
    );
  }
  const templates = new Map<string, Record<string, string>>();
  const layouts: Record<string, string> = {};
  const partials: Record<string, string> = {};
  const files = new Map<string, string>();
  const contentOf = async (file: string): Promise<string> => {
    const content = await readFile(file, 'utf8');
    // PostgreSQL's jsonb, where the sources are kept, cannot hold it.
    if (content.includes('\0')) throw new ReliableMailSetupError(`fileTemplates: ${file} holds a NUL character`);
    files.set(file, content);
    return content;
  };
  for (const [path, file] of await filesUnder(dir)) {
    if (!path.endsWith('.hbs')) continue;
    const stem = path.slice(0, -'.hbs'.length);
    if (path.startsWith(`${partialsDir}/`)) {
      partials[stem.slice(partialsDir.length + 1)] = await contentOf(file);
      continue;
    }
    if (path.startsWith(`${layoutsDir}/`)) {
      const key = stem.slice(layoutsDir.length + 1);
      if (!/^[^.]+\.(html|mjml|text)$/.test(key))
        throw new ReliableMailSetupError(
          `fileTemplates: the layout ${file} is not named <layout>.<html|mjml|text>.hbs`,
        );
      layouts[key] = await contentOf(file);
      continue;
    }
    const slash = stem.lastIndexOf('/');
    const [base, ...rest] = stem.slice(slash + 1).split('.');
    const part = rest.at(-1) ?? '';
    const locale = rest.length === 2 ? localeOf(rest[0]) : null;
    if (!base || !isPart(part) || rest.length > 2 || (rest.length === 2 && !locale)) {
      throw new ReliableMailSetupError(`fileTemplates: ${file} is not a template file: ${FILE_PATTERN}`);
    }
    const name = stem.slice(0, slash + 1) + base;
    const parts = templates.get(name) ?? {};
    parts[locale ? `${locale}.${part}` : part] = await contentOf(file);
    templates.set(name, parts);
  }
  if (templates.size === 0) {
    throw new ReliableMailSetupError(
      `fileTemplates: the folder ${dir} holds no template; it should hold ${EXPECTED} ` +
        `(${layoutsDir}/ and ${partialsDir}/ hold layouts and partials); ${distHint(dir)}`,
    );
  }
  return { templates, layouts, partials, files };
}

/**
 * Refuses a folder whose sources render a partial it does not have, or call a helper neither Handlebars nor the
 * `helpers` option has: each would fail every mail of its template, at send, for good. What only rendering can tell
 * (a partial chosen by a subexpression, `{{name}}` that may be a value) is left to rendering.
 */
function checkReferences(folder: ParsedFolder, partialsDir: string, helpers: FileTemplatesOptions['helpers']): void {
  const references = new Map<string, SourceReferences>();
  for (const [file, source] of folder.files) {
    try {
      references.set(file, referencesOf(source));
    } catch (error) {
      throw new ReliableMailSetupError(`fileTemplates: ${file} does not parse: ${(error as Error).message}`);
    }
  }
  const unresolved = unresolvedReferences(references, {
    partials: Object.keys(folder.partials),
    helpers: Object.keys(helpers ?? {}),
  });
  if (unresolved.length === 0) return;
  const faults = unresolved.map(({ source, kind, name }) =>
    kind === 'partial'
      ? `${source} renders the partial "${name}", which the folder does not have (${partialsDir}/${name}.hbs)`
      : `${source} calls the helper "${name}", which is neither one of Handlebars' nor in the helpers option`,
  );
  throw new ReliableMailSetupError(`fileTemplates: ${faults.join('; ')}`);
}

/** Whether the template's body is MJML: a `.mjml.hbs` part instead of `.html.hbs`. */
const isMjml = (parts: Record<string, string>): boolean => Object.keys(parts).some((key) => key.endsWith('mjml'));

/** The kind of layout each of the template's parts is wrapped in: an MJML body needs an MJML layout. */
function layoutKindOf(key: string): 'html' | 'mjml' | 'text' | null {
  const part = key.slice(key.lastIndexOf('.') + 1);
  return part === 'subject' ? null : (part as 'html' | 'mjml' | 'text');
}

/** The settings that change what a template renders, kept with its sources. */
type StoredSettings = Pick<FileTemplateSources, 'defaultLayout' | 'inlineCss' | 'strict'>;

/** The sources of one template: its parts, the layouts they use, every partial, and the settings stored with them. */
function sourcesOf(parts: Record<string, string>, folder: ParsedFolder, settings: StoredSettings): FileTemplateSources {
  const layouts: Record<string, string> = {};
  for (const [key, source] of Object.entries(parts)) {
    const kind = layoutKindOf(key);
    if (!kind) continue;
    const layout = layoutLine(source).layout ?? settings.defaultLayout;
    const file = `${layout}.${kind}`;
    if (Object.hasOwn(folder.layouts, file)) layouts[file] = folder.layouts[file];
  }
  return { format: SOURCES_FORMAT, parts, layouts, partials: folder.partials, ...settings };
}

/** The step from rendered html to what is sent: MJML to html, then CSS inlined; null when there is none. */
async function htmlTransform(mjml: boolean, inlineCss: boolean): Promise<((html: string) => Promise<string>) | null> {
  if (!mjml && !inlineCss) return null;
  const toHtml = mjml
    ? (await loadSdk('mjml', 'fileTemplates (a .mjml.hbs template)', () => import('mjml'))).default
    : null;
  const inline = inlineCss
    ? (await loadSdk('juice', 'fileTemplates({ inlineCss: true })', () => import('juice'))).default
    : null;
  return async (html) => {
    // mj-include would read files at send time that are not part of the version: partials are.
    const converted = toHtml ? (await toHtml(html, { ignoreIncludes: true })).html : html;
    return inline ? inline(converted) : converted;
  };
}

/** A template from its sources: how a file template is made at start and made again from the database. */
async function templateOf(
  name: string,
  version: string,
  sources: FileTemplateSources,
  settings: FolderSettings,
): Promise<FileTemplate> {
  const { parts, partials, defaultLayout, inlineCss, strict } = sources;
  const mjml = isMjml(parts);
  if (mjml && Object.keys(parts).some((key) => key.endsWith('html')))
    throw new InvalidTemplateError(`"${name}"`, 'has both html and mjml parts: a template is one or the other');
  const body = mjml ? 'mjml' : 'html';
  const sourcesFor = (prefix: string): HandlebarsSources => ({
    subject: parts[`${prefix}subject`],
    html: parts[`${prefix}${body}`],
    text: parts[`${prefix}text`],
  });
  const locales: Record<string, HandlebarsSources> = {};
  for (const key of Object.keys(parts)) {
    const dot = key.lastIndexOf('.');
    if (dot > 0) locales[key.slice(0, dot)] = sourcesFor(`${key.slice(0, dot)}.`);
  }
  const layouts: Record<string, HandlebarsLayout> = {};
  for (const [key, source] of Object.entries(sources.layouts)) {
    const dot = key.lastIndexOf('.');
    const kind = key.slice(dot + 1);
    // An MJML template's html is MJML until transformed: its html layout is the MJML one.
    const part = kind === 'text' ? 'text' : kind === body ? 'html' : null;
    if (part) (layouts[key.slice(0, dot)] ??= {})[part] = source;
  }
  const defaults = sourcesFor('');
  if (defaults.subject === undefined) throw new InvalidTemplateError(`"${name}"`, `needs ${name}.subject.hbs`);
  const template = handlebarsTemplate({
    name,
    version,
    subject: defaults.subject,
    html: defaults.html,
    text: defaults.text,
    locales,
    partials,
    layouts,
    defaultLayout,
    helpers: settings.helpers,
    strict,
    transformHtml: (await htmlTransform(mjml, inlineCss)) ?? undefined,
  });
  return { ...template, version, sources };
}

const isStringRecord = (value: unknown): value is Record<string, string> =>
  !!value &&
  typeof value === 'object' &&
  !Array.isArray(value) &&
  Object.values(value).every((entry) => typeof entry === 'string');

/**
 * A folder of Handlebars templates, for the module's `templates` option: each template is read once, at start, and
 * versioned by the hash of its sources (its parts, the layouts they use, every partial). See docs/file-templates.md.
 */
export class MailTemplateFolder {
  /** The folder's absolute path. */
  readonly dir: string;
  private readonly layoutsDir: string;
  private readonly partialsDir: string;

  constructor(private readonly options: FileTemplatesOptions) {
    if (!options || typeof options.dir !== 'string' || options.dir.length === 0)
      throw new TypeError('fileTemplates needs { dir }: the folder of templates');
    this.dir = resolve(options.dir);
    this.layoutsDir = (options.layouts ?? 'layouts').replace(/^\/+|\/+$/g, '');
    this.partialsDir = (options.partials ?? 'partials').replace(/^\/+|\/+$/g, '');
  }

  /**
   * Reads and compiles every template of the folder; a folder missing, empty or with a broken file throws, as does
   * one whose files render a partial or call a helper it lacks.
   */
  async load(): Promise<FileTemplate[]> {
    const folder = await parseFolder(this.dir, this.layoutsDir, this.partialsDir);
    const { defaultLayout = 'main', inlineCss = false, strict = false } = this.options;
    const templates: FileTemplate[] = [];
    for (const [name, parts] of [...folder.templates].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const sources = sourcesOf(parts, folder, { defaultLayout, inlineCss, strict });
      try {
        templates.push(await templateOf(name, sourceHash(sources), sources, this.options));
      } catch (error) {
        if (!(error instanceof InvalidTemplateError)) throw error;
        throw new InvalidTemplateError(`"${name}" (${join(this.dir, name)}.*.hbs)`, error.reason);
      }
    }
    checkReferences(folder, join(this.dir, this.partialsDir), this.options.helpers);
    return templates;
  }

  /**
   * The version of a template kept in the database, made again with this folder's helpers: a mail enqueued before a
   * deploy that changed its files. Throws an InvalidTemplateError when the stored sources are not a version's, and
   * another error when they are in a format of a later release.
   */
  restore(name: string, version: string, stored: unknown): Promise<FileTemplate> {
    return restoreFileTemplate(name, version, stored, this.options);
  }
}

/**
 * Sources saved by a later release, in a format this one cannot read; an instance of that release can. Not an
 * `InvalidTemplateError`: in a rolling deploy the mail waits for one of those rather than fail.
 */
class LaterSourcesFormatError extends ReliableMailError {}

/**
 * A stored version made again with `settings`; sources in this release's format must still hash to the version they
 * are kept under.
 */
export async function restoreFileTemplate(
  name: string,
  version: string,
  stored: unknown,
  settings: FolderSettings,
): Promise<FileTemplate> {
  const label = `"${name}"@${version}`;
  const sources = stored as FileTemplateSources;
  const format = sources?.format as unknown;
  if (typeof format === 'number' && format > SOURCES_FORMAT) {
    throw new LaterSourcesFormatError(
      `template ${label} is kept in the format ${format} of a later release, which this one (format ` +
        `${SOURCES_FORMAT}) cannot read`,
    );
  }
  if (
    !sources ||
    format !== SOURCES_FORMAT ||
    !isStringRecord(sources.parts) ||
    !isStringRecord(sources.layouts) ||
    !isStringRecord(sources.partials) ||
    typeof sources.defaultLayout !== 'string' ||
    typeof sources.inlineCss !== 'boolean' ||
    typeof sources.strict !== 'boolean'
  ) {
    throw new InvalidTemplateError(label, 'has stored sources that are not those of a file template');
  }
  if (sourceHash(sources) !== version) {
    throw new InvalidTemplateError(label, `has stored sources that hash to ${sourceHash(sources)}, not to its version`);
  }
  return templateOf(name, version, sources, settings);
}

/**
 * The templates of a folder, for the module's `templates` option (beside templates made in code, if any):
 *
 * ```ts
 * ReliableMailModule.forRoot({ templates: [fileTemplates({ dir: join(import.meta.dirname, 'mail-templates') })] })
 * ```
 */
export function fileTemplates(options: FileTemplatesOptions): MailTemplateFolder {
  return new MailTemplateFolder(options);
}
