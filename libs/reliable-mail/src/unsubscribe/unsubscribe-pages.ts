import { html, type Markup } from '../console/views/html.js';
import type { UnsubscribeRequest } from './unsubscribe-token.js';

// The pages a person sees at a one-click link: the GET of a link followed in a browser (or fetched by a link scanner,
// which must unsubscribe nobody) answers a page whose button posts the one-click body; the POST from that button
// answers that it is done. A mail client's own POST gets no page.

/** What a browser may do with these pages: show them, post the form to their own origin, and nothing else. */
export const UNSUBSCRIBE_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  // The link's token is in the URL: no other site learns it through a Referer, and no cache or index keeps it.
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Robots-Tag': 'noindex',
};

function page(title: string, body: Markup): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title}</title>
        <style>
          body {
            font:
              16px/1.5 system-ui,
              sans-serif;
            max-width: 32rem;
            margin: 4rem auto;
            padding: 0 1rem;
          }
          button {
            font: inherit;
            padding: 0.5rem 1.25rem;
            cursor: pointer;
          }
        </style>
      </head>
      <body>
        ${body}
      </body>
    </html>`.text;
}

/** The page of a link followed with a GET: it names what the button unsubscribes, and unsubscribes nothing itself. */
export function confirmationPage({ category, address }: UnsubscribeRequest, token: string): string {
  return page(
    'Unsubscribe',
    html`<h1>Unsubscribe</h1>
      <p>Stop sending <strong>${category}</strong> mail to <strong>${address}</strong>?</p>
      <form method="post" action="?token=${encodeURIComponent(token)}">
        <input type="hidden" name="List-Unsubscribe" value="One-Click" />
        <button type="submit">Unsubscribe</button>
      </form>`,
  );
}

/** The page a person's browser gets once the button's POST has unsubscribed them. */
export function unsubscribedPage({ category, address }: UnsubscribeRequest): string {
  return page(
    'Unsubscribed',
    html`<h1>Unsubscribed</h1>
      <p><strong>${address}</strong> will get no more <strong>${category}</strong> mail.</p>`,
  );
}
