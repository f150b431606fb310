import Handlebars from 'handlebars';
import { htmlToText } from './html-to-text.js';
import {
  InvalidTemplateError,
  type MailRenderContext,
  type MailTemplate,
  type ParamsSchema,
  paramsValidator,
  type RenderedContent,
  type TemplateVersion,
} from './mail-template.js';

/** Handlebars sources of one locale; a part it leaves out falls back to the default sources. */
export interface HandlebarsSources {
  subject?: string;
  html?: string;
  text?: string;
}

/** A layout's sources: each wraps the part of its name, which it places with `{{{body}}}`. */
export interface HandlebarsLayout {
  html?: string;
  text?: string;
}

export interface HandlebarsTemplateOptions {
  name: string;
  version: TemplateVersion;
  /** The subject, rendered without html escaping (line breaks in it become spaces). */
  subject: string;
  /** The html part; `{{value}}` is html-escaped, `{{{value}}}` is not. Needed unless `text` is given. */
  html?: string;
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
  /**
   * Layouts by name. An html or text source whose first line is `{{!< name}}` is rendered into that layout's part
   * of the same kind, where the layout writes `{{{body}}}`; `{{!< none}}` asks for no layout.
   */
  layouts?: Record<string, HandlebarsLayout>;
  /** The layout of a source without such a first line, for the parts it has. */
  defaultLayout?: string;
  /**
   * Applied to the rendered html (its layout included) before the text part is derived from it: MJML to html, CSS
   * inlining. A throw or a rejection fails the row as a failing render does.
   */
  transformHtml?: (html: string) => string | Promise<string>;
}

/** `{{!< name}}` on a source's first line: a comment to Handlebars, the choice of a layout to this template. */
const LAYOUT_LINE = /^\{\{!<\s*([^\s}]+)\s*\}\}[ \t]*(?:\r?\n)?/;
const NO_LAYOUT = 'none';

/** The layout a source asks for on its first line (null when it names none), and the source without that line. */
export function layoutLine(source: string): { layout: string | null; body: string } {
  const match = LAYOUT_LINE.exec(source);
  return match ? { layout: match[1], body: source.slice(match[0].length) } : { layout: null, body: source };
}

type Compiled = (params: unknown, locale: string | undefined) => string;

interface CompiledSources {
  subject: Compiled;
  html: Compiled | null;
  text: Compiled | null;
}

type LayoutPart = keyof HandlebarsLayout;

/**
 * A `MailTemplate` on Handlebars. The sources are parsed when the template is made, so a syntax error shows at
 * start-up; each template gets its own Handlebars environment with its helpers and partials.
 */
export function handlebarsTemplate(options: HandlebarsTemplateOptions): MailTemplate<Record<string, unknown>> {
  const {
    name,
    version,
    schema,
    locales = {},
    helpers = {},
    partials = {},
    strict = false,
    layouts = {},
    defaultLayout,
    transformHtml,
  } = options;
  const label = `"${name}"@${version}`;
  const handlebars = Handlebars.create();
  handlebars.registerHelper(helpers);
  handlebars.registerPartial(partials);
  const parse = (part: string, source: unknown, escape: boolean): Handlebars.TemplateDelegate => {
    if (typeof source !== 'string')
      throw new InvalidTemplateError(label, `needs ${part} as a Handlebars source string`);
    try {
      handlebars.parse(source);
    } catch (error) {
      throw new InvalidTemplateError(label, `has a ${part} that does not parse: ${(error as Error).message}`);
    }
    return handlebars.compile(source, { noEscape: !escape, strict });
  };
  const compiledLayouts = new Map<string, Handlebars.TemplateDelegate>();
  const layoutOf = (layout: string, kind: LayoutPart): Handlebars.TemplateDelegate | null => {
    const key = `${layout}.${kind}`;
    let compiled = compiledLayouts.get(key);
    if (!compiled) {
      const source = Object.hasOwn(layouts, layout) ? layouts[layout][kind] : undefined;
      if (source === undefined) return null;
      compiled = parse(`layout ${key}`, source, kind === 'html');
      compiledLayouts.set(key, compiled);
    }
    return compiled;
  };
  const compile = (part: string, source: unknown, kind: LayoutPart | null): Compiled => {
    const { layout: named, body } =
      kind && typeof source === 'string' ? layoutLine(source) : { layout: null, body: source };
    const template = parse(part, body, kind === 'html');
    const render: Compiled = (params, locale) => template(params, { data: { locale } });
    if (!kind || named === NO_LAYOUT) return render;
    const layout = named ?? defaultLayout;
    const wrapper = layout === undefined ? null : layoutOf(layout, kind);
    if (!wrapper) {
      if (named !== null)
        throw new InvalidTemplateError(label, `has a ${part} that names layout "${named}", which has no ${kind} part`);
      return render;
    }
    const wrap = kind === 'html' ? (body: string) => new handlebars.SafeString(body) : (body: string) => body;
    return (params, locale) =>
      wrapper({ ...(params as object), body: wrap(render(params, locale)) }, { data: { locale } });
  };
  const compileSources = (
    sources: HandlebarsSources,
    fallback: CompiledSources | null,
    prefix: string,
  ): CompiledSources => ({
    subject:
      sources.subject !== undefined || !fallback
        ? compile(`${prefix}subject`, sources.subject, null)
        : fallback.subject,
    html: sources.html !== undefined ? compile(`${prefix}html`, sources.html, 'html') : (fallback?.html ?? null),
    text: sources.text !== undefined ? compile(`${prefix}text`, sources.text, 'text') : (fallback?.text ?? null),
  });
  if (options.html === undefined && options.text === undefined)
    throw new InvalidTemplateError(label, 'needs html or text as a Handlebars source string');
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
    render(params: Record<string, unknown>, { locale }: MailRenderContext) {
      const sources = sourcesFor(locale);
      const subject = sources
        .subject(params, locale)
        // A fold starts where whitespace does (the lookbehind): tried at each space of a long run, quadratic time.
        .replace(/(?<!\s)\s*[\r\n]+\s*/g, ' ')
        .trim();
      const text = sources.text?.(params, locale);
      const finish = (html: string | undefined): RenderedContent => ({
        subject,
        html,
        text: text ?? (html === undefined ? undefined : htmlToText(html)),
      });
      const html = sources.html?.(params, locale);
      if (html === undefined || !transformHtml) return finish(html);
      return Promise.resolve(transformHtml(html)).then(finish);
    },
  };
}
