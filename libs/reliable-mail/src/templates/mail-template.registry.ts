import { InvalidOptionsError } from '../errors.js';
import type { FileTemplate, MailTemplateFolder } from './file-templates.js';
import { InvalidTemplateError, type MailTemplate, type TemplateVersion } from './mail-template.js';
import { SOURCE_HASH_PATTERN } from './source-hash.js';

const TEMPLATE_NAME_PATTERN = /^[A-Za-z0-9][\w.:/-]{0,199}$/;

/**
 * The templates mails can name, each under one or more versions. It holds the module's `templates` option; a
 * provider adds more with `register`, in its constructor or `onModuleInit` (before the dispatcher starts):
 *
 * ```ts
 * @Injectable()
 * export class OrderTemplates implements OnModuleInit {
 *   constructor(private readonly templates: MailTemplateRegistry) {}
 *   onModuleInit() {
 *     this.templates.register(orderConfirmationV1).register(orderConfirmationV2);
 *   }
 * }
 * ```
 *
 * Register the same templates in every instance: one that enqueues validates parameters and picks the version,
 * one that dispatches renders it. Templates from files (`fileTemplates()`) come through the `templates` option
 * only: the start saves their sources, which a later deploy renders the mails enqueued before it with.
 */
export class MailTemplateRegistry {
  private readonly byName = new Map<string, Map<TemplateVersion, MailTemplate>>();
  private readonly folderOf = new Map<string, MailTemplateFolder>();
  private readonly folders: MailTemplateFolder[] = [];
  private readonly loadedFromFiles: FileTemplate[] = [];

  /**
   * A registry holding the module's `templates` option, each folder's templates read: a template it cannot take is
   * an invalid option.
   */
  static async load(templates: ReadonlyArray<MailTemplate | MailTemplateFolder>): Promise<MailTemplateRegistry> {
    const registry = new MailTemplateRegistry();
    for (const [index, entry] of templates.entries()) {
      try {
        if (isFolder(entry)) await registry.addFolder(entry);
        else registry.register(entry);
      } catch (error) {
        if (error instanceof InvalidTemplateError)
          throw new InvalidOptionsError(`templates[${index}]`, `${error.template}: ${error.reason}`);
        throw error;
      }
    }
    return registry;
  }

  /**
   * Adds a template version. Registering the same object again does nothing; another template under a name and
   * version already taken throws, since rows enqueued with that version must keep rendering the same way.
   */
  register(template: MailTemplate): this {
    this.add(template, false);
    return this;
  }

  private async addFolder(folder: MailTemplateFolder): Promise<void> {
    this.folders.push(folder);
    for (const template of await folder.load()) {
      this.add(template, true);
      this.folderOf.set(template.name, folder);
      this.loadedFromFiles.push(template);
    }
  }

  private add(template: MailTemplate, fromFiles: boolean): void {
    if (!template || typeof template !== 'object') {
      throw new InvalidTemplateError(String(template), 'must be an object with name, version and render');
    }
    const { name, version } = template;
    if (typeof name !== 'string' || !TEMPLATE_NAME_PATTERN.test(name)) {
      throw new InvalidTemplateError(
        JSON.stringify(name) ?? String(name),
        'needs a name of 1 to 200 letters, digits, and _ . : / -, starting with a letter or digit',
      );
    }
    const label = `"${name}"@${String(version)}`;
    const hashed = typeof version === 'string' && SOURCE_HASH_PATTERN.test(version);
    if (hashed && !fromFiles) {
      throw new InvalidTemplateError(
        label,
        'has the hash of its sources as its version: such templates come from fileTemplates() in the templates ' +
          'option, whose sources the start saves',
      );
    }
    if (!hashed && (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1)) {
      throw new InvalidTemplateError(label, 'needs a version that is an integer >= 1');
    }
    if (typeof template.render !== 'function') {
      throw new InvalidTemplateError(label, 'needs a render(params, context) function');
    }
    if (template.validate !== undefined && typeof template.validate !== 'function') {
      throw new InvalidTemplateError(label, 'has a validate that is not a function');
    }
    const versions = this.byName.get(name) ?? new Map<TemplateVersion, MailTemplate>();
    const existing = versions.get(version);
    if (existing && existing !== template) {
      throw new InvalidTemplateError(label, 'is already registered; register a new version to change a template');
    }
    // A hashed version is the only one of its name: enqueue picks it, and an earlier one is found in the database.
    const [other] = [...versions.keys()].filter((taken) => taken !== version && (hashed || typeof taken === 'string'));
    if (other !== undefined) {
      throw new InvalidTemplateError(
        label,
        `is also registered as ${JSON.stringify(other)}: a name is either versioned by hand, with numbers, or ` +
          'loaded from one folder of files',
      );
    }
    versions.set(version, template);
    this.byName.set(name, versions);
  }

  /** The template of this name and version, if registered. */
  get(name: string, version: TemplateVersion): MailTemplate | undefined {
    return this.byName.get(name)?.get(version);
  }

  /** The version enqueue uses: the highest registered, or the one of the files loaded at this start. */
  latest(name: string): MailTemplate | undefined {
    const versions = this.versions(name);
    return versions.length > 0 ? this.get(name, versions[versions.length - 1]) : undefined;
  }

  /** The registered versions of the name, lowest first. */
  versions(name: string): TemplateVersion[] {
    return [...(this.byName.get(name)?.keys() ?? [])].sort((a, b) => Number(a) - Number(b));
  }

  /** Every registered template name. */
  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  /** The templates read from folders at this start, whose sources the start saves. */
  fileTemplates(): readonly FileTemplate[] {
    return this.loadedFromFiles;
  }

  /**
   * The folder that makes an earlier version of `name` again from its stored sources: the one it is loaded from at
   * this start, else the first (its helpers are the best guess for a template no folder holds any more).
   */
  folderFor(name: string): MailTemplateFolder | undefined {
    return this.folderOf.get(name) ?? this.folders[0];
  }
}

function isFolder(entry: MailTemplate | MailTemplateFolder): entry is MailTemplateFolder {
  return !!entry && typeof entry === 'object' && typeof (entry as MailTemplateFolder).load === 'function';
}
