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

/** Where the elements dropped with their content start (they end at the first end tag of the same name). */
const DROPPED_NAMES = ['head', 'style', 'script', 'title', 'template', 'noscript'];
const DROPPED_START = new RegExp(`<(${DROPPED_NAMES.join('|')})\\b`, 'gi');
const DROPPED_END = new Map(DROPPED_NAMES.map((name) => [name, new RegExp(`<\\/${name}\\s*>`, 'gi')]));
/** A link, read at a start that LINK_START found. */
const LINK = /<a\b([^>]*)>([\s\S]*?)<\/a\s*>/iy;
const LINK_START = /<a\b/gi;
const LINK_END = /<\/a\s*>/gi;
const COMMENT = /<!--[\s\S]*?-->/g;
const HREF = /\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/i;
const PARAGRAPH_TAGS = /<\/?(?:p|h[1-6]|table|ul|ol|blockquote|pre|hr|address|figure)\b[^>]*>/gi;
const LINE_TAGS =
  /<\/?(?:div|tr|section|article|header|footer|main|nav|aside|dl|dt|dd|center|tbody|thead|tfoot)\b[^>]*>/gi;
// Private-use characters mark where a link's URL goes back in, once tags are stripped and entities decoded, and
// where a block starts or ends: a run of block edges is one line break (or one blank line around a paragraph).
const URL_MARK = /\uE000(\d+)\uE000/g;
const LINE = '\uE001';
const PARAGRAPH = '\uE002';
/** The markers' characters and NUL in the html, written or as references (`&#xE000;` decoded after the tags go). */
const MARKS_AND_NUL = /[\uE000-\uE002\0]|&#(?:x0*e00[0-2]|0*5734[4-6]);/gi;
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
 * `text` with `pattern` replaced up to the end of the last `end` only. Every match of `pattern` ends with `end` (a tag
 * with `>`, a comment with `-->`, and no `end` within either but its last), so none lies past it; and a start past
 * it, which would scan to the end of the text for an `end` that is not there and fail, is not tried. Tried at each
 * of a run of such starts (`<<<<…`, `<p <p …`), a pattern took quadratic time: 256,000 characters held the event
 * loop for 29 s.
 */
function replaceBeforeLastEnd(text: string, end: string, pattern: RegExp, replacement: string): string {
  const cut = text.lastIndexOf(end) + end.length;
  return cut < end.length ? text : text.slice(0, cut).replace(pattern, replacement) + text.slice(cut);
}

/**
 * Drops each dropped element with its content, as `/<(head|…)\b[^>]*>[\s\S]*?<\/\1\s*>/gi` would (leftmost first,
 * to the first end tag of its name), in linear time. That pattern, at each start tag, scanned to the next `>` and
 * then to the end of the text for an end tag that was not there, and did so again from the next character: here the
 * next `>` is found once for a run of starts, and a name without an end tag is not looked for again.
 */
function dropElements(html: string): string {
  // Every start tag ends at a `>`: what follows the last one holds none.
  const searched = html.slice(0, html.lastIndexOf('>') + 1);
  const unclosed = new Set<string>();
  let kept = '';
  let from = 0;
  let tagEnd = -1;
  DROPPED_START.lastIndex = 0;
  for (let start = DROPPED_START.exec(searched); start; start = DROPPED_START.exec(searched)) {
    const nameEnd = start.index + start[0].length;
    if (tagEnd < nameEnd) tagEnd = searched.indexOf('>', nameEnd);
    const name = start[1].toLowerCase();
    const end = DROPPED_END.get(name)!;
    end.lastIndex = tagEnd + 1;
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

/**
 * Replaces each link, as `LINK` with the g flag would, in linear time. A link ends at a `</a>`, and its start tag at
 * a `>` before that: a start before the last `>` that precedes the last `</a>` always makes a link, and one after it
 * never does. That pattern tried each of those too, scanning to the last `</a>` and failing (`<a <a <a … </a>`).
 */
function replaceLinks(text: string, link: (attributes: string, inner: string) => string): string {
  let lastEnd = -1;
  for (const end of text.matchAll(LINK_END)) lastEnd = end.index;
  const lastStartEnd = lastEnd < 0 ? -1 : text.lastIndexOf('>', lastEnd - 1);
  let replaced = '';
  let from = 0;
  LINK_START.lastIndex = 0;
  for (let start = LINK_START.exec(text); start && start.index < lastStartEnd; start = LINK_START.exec(text)) {
    LINK.lastIndex = start.index;
    const [whole, attributes, inner] = LINK.exec(text)!;
    replaced += text.slice(from, start.index) + link(attributes, inner);
    from = LINK_START.lastIndex = start.index + whole.length;
  }
  return replaced + text.slice(from);
}

/** Removes each tag; what follows the last `>` holds none. */
function stripTags(html: string): string {
  return replaceBeforeLastEnd(html, '>', /<[^>]*>/g, '');
}

/**
 * A plain-text version of an html body, for the text part of a mail that has only html: block elements become
 * line breaks, list items `- ` lines, links `label (url)`, and the rest of the markup is dropped. Not a renderer:
 * it is meant for the simple, table-based markup of transactional mail.
 */
export function htmlToText(html: string): string {
  const urls: string[] = [];
  let text = replaceBeforeLastEnd(html.replace(MARKS_AND_NUL, ''), '-->', COMMENT, '');
  text = dropElements(text);
  // Whitespace in html source is a single space wherever it is.
  text = replaceLinks(text.replace(/\s+/g, ' '), (attributes, inner) => {
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
  text = replaceBeforeLastEnd(text, '>', /<br\b[^>]*>/gi, '\n');
  text = replaceBeforeLastEnd(text, '>', /<li\b[^>]*>/gi, `${LINE}- `)
    .replace(/<\/li\s*>/gi, LINE)
    .replace(/<\/t[dh]\s*>/gi, ' ');
  text = replaceBeforeLastEnd(text, '>', PARAGRAPH_TAGS, PARAGRAPH);
  text = replaceBeforeLastEnd(text, '>', LINE_TAGS, LINE);
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
