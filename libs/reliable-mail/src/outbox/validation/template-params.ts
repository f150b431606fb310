import { MailValidationError } from '../../errors.js';
import type { StoredTemplate, TemplateMail } from '../mail.types.js';
import type { JsonValue } from '../mail.types.js';
import { toJsonValue } from './json.js';
import type { MailContentRules } from './content-rules.js';

function parseLocale(locale: unknown): string | undefined {
  if (locale === undefined) return undefined;
  if (typeof locale !== 'string' || locale.length === 0) {
    throw new MailValidationError('locale', 'must be a BCP 47 language tag such as "en" or "de-AT"');
  }
  try {
    return Intl.getCanonicalLocales(locale)[0];
  } catch {
    throw new MailValidationError('locale', `is not a BCP 47 language tag: ${JSON.stringify(locale)}`);
  }
}

/** Resolves the template to its newest version and checks the parameters with the template's own validation. */
export function parseTemplate(mail: TemplateMail<object>, rules: MailContentRules): StoredTemplate {
  const { template: name, params = {} } = mail;
  if (typeof name !== 'string' || name.length === 0) {
    throw new MailValidationError('template', 'must be the name of a registered template');
  }
  for (const part of ['text', 'html'] as const) {
    if ((mail as unknown as Record<string, unknown>)[part] !== undefined) {
      throw new MailValidationError(part, 'cannot be given together with template: the template renders the body');
    }
  }
  const template = rules.templates?.latest(name);
  if (!template) {
    const known = rules.templates?.names() ?? [];
    throw new MailValidationError(
      'template',
      `names no registered template: ${JSON.stringify(name)} (registered: ${known.length > 0 ? known.join(', ') : 'none'})`,
    );
  }
  if (!params || typeof params !== 'object' || Array.isArray(params)) {
    throw new MailValidationError('params', 'must be a plain object of JSON values');
  }
  const stored = toJsonValue('params', params) as Record<string, JsonValue>;
  if (template.validate) {
    try {
      template.validate(structuredClone(stored));
    } catch (error) {
      const label = `template "${name}"@${template.version}`;
      if (error instanceof MailValidationError) {
        const field =
          error.field === 'params' || error.field.startsWith('params.') || error.field.startsWith('params[')
            ? error.field
            : `params.${error.field}`;
        throw new MailValidationError(field, `${error.reason} (${label})`);
      }
      throw new MailValidationError(
        'params',
        `are refused by ${label}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  const locale = parseLocale(mail.locale);
  return locale === undefined
    ? { name, version: template.version, params: stored }
    : { name, version: template.version, params: stored, locale };
}
