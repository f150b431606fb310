// Every value reaches the page through `html`, escaped, unless it is itself markup made by `html`: a subject, an
// SMTP reply or a metadata value is text an outsider may have chosen, and the console is an operator's page.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Markup that `html` inserts as it is: made only by `html` itself (and `raw`, for the console's own constants). */
export class Markup {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (character) => ESCAPES[character]);
}

type Interpolated = Markup | string | number | boolean | null | undefined | readonly Interpolated[];

function render(value: Interpolated): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Markup) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Interpolated[]): Markup {
  let text = strings[0];
  for (let index = 0; index < values.length; index++) text += render(values[index]) + strings[index + 1];
  return new Markup(text);
}

/** The console's own markup constants (its stylesheet, an SVG path it computed): never a value from a row. */
export function raw(text: string): Markup {
  return new Markup(text);
}
