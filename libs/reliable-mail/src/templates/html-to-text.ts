const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  copy: '©',
  reg: '®',
  trade: '™',
  hellip: '…',
  mdash: '—',
  ndash: '–',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
  laquo: '«',
  raquo: '»',
  bull: '•',
  middot: '·',
  euro: '€',
  pound: '£',
  yen: '¥',
  cent: '¢',
  times: '×',
  deg: '°',
};

/** The start tags of the elements dropped with their content (up to the end tag of the same name). */
const DROPPED_START = /<(head|style|script|title|template|noscript)\b[^>]*>/gi;
const LINK = /<a\b([^>]*)>([\s\S]*?)<\/a\s*>/gi;
const LINK_END = /<\/a\s*>/gi;
const TAG_END = />/g;
const COMMENT = /<!--[\s\S]*?-->/g;
const COMMENT_END = /-->/g;
const HREF = /\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/i;
const PARAGRAPH_TAGS = /<\/?(?:p|h[1-6]|table|ul|ol|blockquote|pre|hr|address|figure)\b[^>]*>/gi;
const LINE_TAGS =
  /<\/?(?:div|tr|section|article|header|footer|main|nav|aside|dl|dt|dd|center|tbody|thead|tfoot)\b[^>]*>/gi;
// Private-use characters mark where a link's URL goes back in, once tags are stripped and entities decoded, and
// where a block starts or ends: a run of block edges is one line break (or one blank line around a paragraph).
const URL_MARK = /\uE000(\d+)\uE000/g;
const LINE = '\uE001';
const PARAGRAPH = '\uE002';
// A run starts where spaces do (the lookbehind): tried at each of a long run of them, it took quadratic time.
const BREAKS = /(?<![ \t])[ \t]*(?:[\uE001\uE002\n][ \t]*)+/g;

/** Decodes named (a common set) and numeric character references; unknown ones are left as written. */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z][a-z0-9]*);/gi, (entity, body: string) => {
    if (body[0] === '#') {
      const code =
        body[1] === 'x' || body[1] === 'X' ? Number.parseInt(body.slice(2), 16) : Number.parseInt(body.slice(1), 10);
      return Number.isInteger(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : entity;
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? entity;
  });
}

/**
 * `text` with `pattern` replaced up to the end of the last match of `end` only. Every match of `pattern` ends with an
 * `end`, so none lies past it; and a start past it, which would scan to the end of the text for an `end` that is not
 * there and fail, is not tried. Tried at each of a run of such starts (`<<<<…`, `<a><a>…` with no `</a>`), a pattern
 * took quadratic time: 256,000 characters held the event loop for 29 s.
 */
function replaceBeforeLastEnd(
  text: string,
  end: RegExp,
  pattern: RegExp,
  replacement: string | ((match: string, ...groups: string[]) => string),
): string {
  let cut = 0;
  for (const match of text.matchAll(end)) cut = match.index + match[0].length;
  return (
    text.slice(0, cut).replace(pattern, replacement as (match: string, ...groups: string[]) => string) + text.slice(cut)
  );
}

/**
 * Drops each element of DROPPED_START with its content, as `/<(head|…)\b[^>]*>[\s\S]*?<\/\1\s*>/gi` would (leftmost
 * first, to the first end tag of its name), in linear time: that pattern tried each start tag whose end tag is not
 * there, scanning to the end of the text for it, and a name without one is not looked for again.
 */
function dropElements(html: string): string {
  const lastTagEnd = html.lastIndexOf('>') + 1;
  const searched = html.slice(0, lastTagEnd);
  const unclosed = new Set<string>();
  let kept = '';
  let from = 0;
  DROPPED_START.lastIndex = 0;
  for (let start = DROPPED_START.exec(searched); start; start = DROPPED_START.exec(searched)) {
    const name = start[1].toLowerCase();
    const end = new RegExp(`<\\/${name}\\s*>`, 'gi');
    end.lastIndex = DROPPED_START.lastIndex;
    const closed = unclosed.has(name) ? null : end.exec(searched);
    if (!closed) {
      unclosed.add(name);
      DROPPED_START.lastIndex = start.index + 1;
      continue;
    }
    kept += searched.slice(from, start.index);
    from = DROPPED_START.lastIndex = closed.index + closed[0].length;
  }
  return kept + html.slice(from);
}

/** Removes each tag; what follows the last `>` holds none. */
function stripTags(html: string): string {
  return replaceBeforeLastEnd(html, TAG_END, /<[^>]*>/g, '');
}

/**
 * A plain-text version of an html body, for the text part of a mail that has only html: block elements become
 * line breaks, list items `- ` lines, links `label (url)`, and the rest of the markup is dropped. Not a renderer:
 * it is meant for the simple, table-based markup of transactional mail.
 */
export function htmlToText(html: string): string {
  const urls: string[] = [];
  let text = replaceBeforeLastEnd(html.replace(/[\uE000-\uE002\0]/g, ''), COMMENT_END, COMMENT, '');
  text = dropElements(text);
  // Whitespace in html source is a single space wherever it is.
  text = replaceBeforeLastEnd(text.replace(/\s+/g, ' '), LINK_END, LINK, (_link, attributes: string, inner: string) => {
    const href = HREF.exec(attributes);
    const url = decodeEntities(href?.[1] ?? href?.[2] ?? href?.[3] ?? '').trim();
    if (!url || url.startsWith('#') || /^javascript:/i.test(url)) return inner;
    const label = decodeEntities(stripTags(inner)).replace(/\s+/g, ' ').trim();
    const bare = url.replace(/^mailto:/i, '');
    urls.push(url);
    const mark = `\uE000${urls.length - 1}\uE000`;
    if (!label) return mark;
    if (label === url || label === bare) return inner;
    return `${inner} (${mark})`;
  });
  text = replaceBeforeLastEnd(text, TAG_END, /<br\b[^>]*>/gi, '\n');
  text = replaceBeforeLastEnd(text, TAG_END, /<li\b[^>]*>/gi, `${LINE}- `)
    .replace(/<\/li\s*>/gi, LINE)
    .replace(/<\/t[dh]\s*>/gi, ' ');
  text = replaceBeforeLastEnd(text, TAG_END, PARAGRAPH_TAGS, PARAGRAPH);
  text = replaceBeforeLastEnd(text, TAG_END, LINE_TAGS, LINE);
  text = decodeEntities(stripTags(text))
    .replace(URL_MARK, (_mark, index: string) => urls[Number(index)])
    .replace(BREAKS, (run) => {
      const newlines = run.split('\n').length - 1;
      return '\n'.repeat(Math.max(newlines, run.includes(PARAGRAPH) ? 2 : run.includes(LINE) ? 1 : 0));
    });
  return text
    .split('\n')
    .map((line) => line.replace(/[ \t\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
