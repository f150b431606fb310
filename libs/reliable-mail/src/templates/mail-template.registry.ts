import { InvalidOptionsError } from '../errors.js';
import { InvalidTemplateError, type MailTemplate } from './mail-template.js';

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
 * one that dispatches renders it.
 */
export class MailTemplateRegistry {
  private readonly byName = new Map<string, Map<number, MailTemplate>>();

  /** A registry holding the module's `templates` option; a template it cannot take is an invalid option. */
  static of(templates: MailTemplate[]): MailTemplateRegistry {
    const registry = new MailTemplateRegistry();
    templates.forEach((template, index) => {
      try {
        registry.register(template);
      } catch (error) {
        if (error instanceof InvalidTemplateError)
          throw new InvalidOptionsError(`templates[${index}]`, `${error.template}: ${error.reason}`);
        throw error;
      }
    });
    return registry;
  }

  /**
   * Adds a template version. Registering the same object again does nothing; another template under a name and
   * version already taken throws, since rows enqueued with that version must keep rendering the same way.
   */
  register(template: MailTemplate): this {
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
    if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) {
      throw new InvalidTemplateError(label, 'needs a version that is an integer >= 1');
    }
    if (typeof template.render !== 'function') {
      throw new InvalidTemplateError(label, 'needs a render(params, context) function');
    }
    if (template.validate !== undefined && typeof template.validate !== 'function') {
      throw new InvalidTemplateError(label, 'has a validate that is not a function');
    }
    const versions = this.byName.get(name) ?? new Map<number, MailTemplate>();
    const existing = versions.get(version);
    if (existing && existing !== template) {
      throw new InvalidTemplateError(label, 'is already registered; register a new version to change a template');
    }
    versions.set(version, template);
    this.byName.set(name, versions);
    return this;
  }

  /** The template of this name and version, if registered. */
  get(name: string, version: number): MailTemplate | undefined {
    return this.byName.get(name)?.get(version);
  }

  /** The highest registered version of the name: the one enqueue uses. */
  latest(name: string): MailTemplate | undefined {
    const versions = this.versions(name);
    return versions.length > 0 ? this.get(name, versions[versions.length - 1]) : undefined;
  }

  /** The registered versions of the name, lowest first. */
  versions(name: string): number[] {
    return [...(this.byName.get(name)?.keys() ?? [])].sort((a, b) => a - b);
  }

  /** Every registered template name. */
  names(): string[] {
    return [...this.byName.keys()].sort();
  }
}
