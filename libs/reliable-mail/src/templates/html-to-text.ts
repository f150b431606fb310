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

const DROPPED_ELEMENTS = /<(head|style|script|title|template|noscript)\b[^>]*>[\s\S]*?<\/\1\s*>/gi;
const LINK = /<a\b([^>]*)>([\s\S]*?)<\/a\s*>/gi;
const HREF = /\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/i;
const PARAGRAPH_TAGS = /<\/?(?:p|h[1-6]|table|ul|ol|blockquote|pre|hr|address|figure)\b[^>]*>/gi;
const LINE_TAGS =
  /<\/?(?:div|tr|section|article|header|footer|main|nav|aside|dl|dt|dd|center|tbody|thead|tfoot)\b[^>]*>/gi;
// Private-use characters mark where a link's URL goes back in, once tags are stripped and entities decoded, and
// where a block starts or ends: a run of block edges is one line break (or one blank line around a paragraph).
const URL_MARK = /\uE000(\d+)\uE000/g;
const LINE = '\uE001';
const PARAGRAPH = '\uE002';
const BREAKS = /[ \t]*(?:[\uE001\uE002\n][ \t]*)+/g;

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

function stripTags(html: string): string {
  return html.replace(/<[^>]*>/g, '');
}

/**
 * A plain-text version of an html body, for the text part of a mail that has only html: block elements become
 * line breaks, list items `- ` lines, links `label (url)`, and the rest of the markup is dropped. Not a renderer:
 * it is meant for the simple, table-based markup of transactional mail.
 */
export function htmlToText(html: string): string {
  const urls: string[] = [];
  let text = html
    .replace(/[\uE000-\uE002\0]/g, '')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(DROPPED_ELEMENTS, '')
    // Whitespace in html source is a single space wherever it is.
    .replace(/\s+/g, ' ')
    .replace(LINK, (_link, attributes: string, inner: string) => {
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
    })
    .replace(/<br\b[^>]*>/gi, '\n')
    .replace(/<li\b[^>]*>/gi, `${LINE}- `)
    .replace(/<\/li\s*>/gi, LINE)
    .replace(/<\/t[dh]\s*>/gi, ' ')
    .replace(PARAGRAPH_TAGS, PARAGRAPH)
    .replace(LINE_TAGS, LINE);
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
