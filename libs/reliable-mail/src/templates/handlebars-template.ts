import Handlebars from 'handlebars';
import { htmlToText } from './html-to-text.js';
import {
  InvalidTemplateError,
  type MailRenderContext,
  type MailTemplate,
  type ParamsSchema,
  paramsValidator,
  type RenderedContent,
} from './mail-template.js';

/** Handlebars sources of one locale; a part it leaves out falls back to the default sources. */
export interface HandlebarsSources {
  subject?: string;
  html?: string;
  text?: string;
}

export interface HandlebarsTemplateOptions {
  name: string;
  version: number;
  /** The subject, rendered without html escaping (line breaks in it become spaces). */
  subject: string;
  /** The html part; `{{value}}` is html-escaped, `{{{value}}}` is not. */
  html: string;
  /** The text part, rendered without escaping. Default: derived from the rendered html by `htmlToText`. */
  text?: string;
  /** Validates the parameters at enqueue (a Standard Schema such as zod, or see `ParamsSchema`). */
  schema?: ParamsSchema;
  /**
   * Sources per locale, picked by the mail's `locale`: the exact tag (`de-AT`), else its language (`de`), else the
   * defaults above. Every part is also rendered with `@locale` set to the mail's locale.
   */
  locales?: Record<string, HandlebarsSources>;
  /** Helpers for this template only (each template has a Handlebars environment of its own). */
  helpers?: Record<string, Handlebars.HelperDelegate>;
  /** Partials for this template only, as sources. */
  partials?: Record<string, string>;
  /** Make a reference to a missing parameter throw (a permanent failure of the row) instead of rendering empty. */
  strict?: boolean;
}

type Compiled = (params: unknown, locale: string | undefined) => string;

interface CompiledSources {
  subject: Compiled;
  html: Compiled;
  text: Compiled | null;
}

/**
 * A `MailTemplate` on Handlebars. The sources are parsed when the template is made, so a syntax error shows at
 * start-up; each template gets its own Handlebars environment with its helpers and partials.
 */
export function handlebarsTemplate(options: HandlebarsTemplateOptions): MailTemplate<Record<string, unknown>> {
  const { name, version, schema, locales = {}, helpers = {}, partials = {}, strict = false } = options;
  const label = `"${name}"@${version}`;
  const handlebars = Handlebars.create();
  handlebars.registerHelper(helpers);
  handlebars.registerPartial(partials);

  const compile = (part: string, source: unknown, escape: boolean): Compiled => {
    if (typeof source !== 'string')
      throw new InvalidTemplateError(label, `needs ${part} as a Handlebars source string`);
    try {
      handlebars.parse(source);
    } catch (error) {
      throw new InvalidTemplateError(label, `has a ${part} that does not parse: ${(error as Error).message}`);
    }
    const template = handlebars.compile(source, { noEscape: !escape, strict });
    return (params, locale) => template(params, { data: { locale } });
  };
  const compileSources = (
    sources: HandlebarsSources,
    fallback: CompiledSources | null,
    prefix: string,
  ): CompiledSources => ({
    subject:
      sources.subject !== undefined || !fallback
        ? compile(`${prefix}subject`, sources.subject, false)
        : fallback.subject,
    html: sources.html !== undefined || !fallback ? compile(`${prefix}html`, sources.html, true) : fallback.html,
    text: sources.text !== undefined ? compile(`${prefix}text`, sources.text, false) : (fallback?.text ?? null),
  });

  const defaults = compileSources(options, null, '');
  const byLocale = new Map(
    Object.entries(locales).map(([locale, sources]) => [
      locale.toLowerCase(),
      compileSources(sources ?? {}, defaults, `locales.${locale}.`),
    ]),
  );
  const sourcesFor = (locale: string | undefined): CompiledSources => {
    if (!locale) return defaults;
    const tag = locale.toLowerCase();
    return byLocale.get(tag) ?? byLocale.get(tag.split('-')[0]) ?? defaults;
  };

  return {
    name,
    version,
    validate: schema ? paramsValidator(schema) : undefined,
    render(params: Record<string, unknown>, { locale }: MailRenderContext): RenderedContent {
      const sources = sourcesFor(locale);
      const html = sources.html(params, locale);
      return {
        subject: sources
          .subject(params, locale)
          .replace(/\s*[\r\n]+\s*/g, ' ')
          .trim(),
        html,
        text: sources.text ? sources.text(params, locale) : htmlToText(html),
      };
    },
  };
}
