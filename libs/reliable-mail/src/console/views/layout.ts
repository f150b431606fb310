import type { ConsoleAccess } from '../console-options.js';
import { html, type Markup } from './html.js';
import { withoutAddresses } from '../../shared/logged-reply.js';

/** What every page knows: where the console is mounted, who looks, and whether actions are allowed. */
export interface PageContext {
  /** The console's root URL path, with a leading slash and none at the end: `/mail`. */
  base: string;
  access: ConsoleAccess;
  readOnly: boolean;
  csrfToken: string;
  /** A line on what the last action did, from the redirect after it. */
  notice?: string;
}

export function canAct(page: PageContext): boolean {
  return !page.readOnly && page.access.permissions.includes('act');
}

export function canReadContent(page: PageContext): boolean {
  return page.access.permissions.includes('content');
}

const SECTIONS = [
  ['', 'Overview'],
  ['/mails', 'Mails'],
  ['/preview', 'Preview'],
  ['/suppressions', 'Suppressions'],
  ['/unsubscribes', 'Unsubscribes'],
  ['/audit', 'Audit'],
] as const;

export function layout(page: PageContext, title: string, section: string, body: Markup): Markup {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${title} · reliable-mail</title>
        <link rel="stylesheet" href="${page.base}/assets/console.css" />
        <script src="${page.base}/assets/console.js" defer></script>
      </head>
      <body>
        <header>
          <strong>reliable-mail</strong>
          <nav>
            ${SECTIONS.map(
              ([path, name]) =>
                html`<a href="${page.base}${path}" ${section === path ? html`aria-current="page"` : ''}>${name}</a>`,
            )}
          </nav>
          <span class="who">
            ${page.access.actor}${page.readOnly ? html` <span class="badge">read-only</span>` : ''}
            ${canReadContent(page) ? '' : html` <span class="badge">content hidden</span>`}
          </span>
        </header>
        <main>
          ${page.notice ? html`<p class="notice" role="status">${page.notice}</p>` : ''}
          <h1>${title}</h1>
          ${body}
        </main>
      </body>
    </html>`;
}

/** A form that posts an action: the CSRF token with it, and the confirmation the action page asked for. */
export function actionForm(page: PageContext, action: string, fields: Markup, button: string): Markup {
  return html`<form method="post" action="${action}" class="action">
    <input type="hidden" name="_csrf" value="${page.csrfToken}" />
    <input type="hidden" name="confirmed" value="yes" />
    ${fields}
    <button type="submit">${button}</button>
  </form>`;
}

export function time(value: Date | string | null | undefined): Markup | string {
  if (!value) return '—';
  const date = value instanceof Date ? value : new Date(value);
  return html`<time datetime="${date.toISOString()}">${date.toISOString().replace('T', ' ').slice(0, 23)}Z</time>`;
}

export function statusBadge(status: string): Markup {
  return html`<span class="status status-${status}">${status}</span>`;
}

/**
 * Text from a server, a provider or an operator, shown to who may not read content with every address in it
 * replaced: the replies and reasons of a mail are an operator's business, its recipients are personal data.
 */
export function redacted(page: PageContext, text: string | null | undefined): string {
  if (!text) return '';
  // Every address, wherever it sits (a reply's `550 5.1.1 <ann@…>`, a reason, a key), as the log finds them.
  return canReadContent(page) ? text : withoutAddresses(text, '(address hidden)');
}

/** An address shown only to who may read content: recipients' addresses are personal data. */
export function address(page: PageContext, value: string): Markup | string {
  return canReadContent(page)
    ? value
    : html`<span class="hidden-content" title="needs the content permission">hidden</span>`;
}
