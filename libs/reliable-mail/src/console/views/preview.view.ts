import type { MailListItem } from '../console-data.types.js';
import type { OutboxRowWithAttempts } from '../../outbox/mail.types.js';
import { html, type Markup } from './html.js';
import { address, canReadContent, layout, type PageContext, statusBadge, time } from './layout.js';
import { messageView } from './timeline.view.js';

export interface PreviewSelection {
  row: OutboxRowWithAttempts;
  /** The subject as the mail renders it (a template's), or the reason it cannot be rendered. */
  subject: string;
  images: boolean;
  part: 'html' | 'text';
}

/** A subject is content: without the permission, a mail shows its template's name, or nothing of it. */
function label(page: PageContext, item: MailListItem): string {
  const subject = canReadContent(page) ? item.subject : '';
  return subject || (item.template ? `(template ${item.template})` : '(subject hidden)');
}

/**
 * The newest mails beside the one chosen (the newest by default), rendered as its recipients would see it: what a
 * developer looks at after clicking through the app, whatever the transport.
 */
export function previewPage(page: PageContext, items: MailListItem[], selected: PreviewSelection | null): Markup {
  const here = (id: string) => `${page.base}/preview?id=${id}`;
  return layout(
    page,
    'Preview',
    '/preview',
    html`<div class="preview">
      <ol class="preview-list" data-testid="preview-list">
        ${items.map(
          (item) =>
            html`<li ${selected?.row.id === item.id ? html`aria-current="true"` : ''}>
              <a href="${here(item.id)}">${label(page, item)}</a>
              <span class="muted"
                >${item.to.map((to, index) => html`${index > 0 ? ', ' : ''}${address(page, to)}`)}</span
              >
              ${statusBadge(item.status)} ${time(item.createdAt)}
            </li>`,
        )}
        ${items.length === 0 ? html`<li class="muted">No mail yet: what the app enqueues shows here.</li>` : ''}
      </ol>
      ${
        selected
          ? html`<section data-testid="preview-mail">
              <h2>${selected.subject}</h2>
              <p>${statusBadge(selected.row.status)} · <a href="${page.base}/mails/${selected.row.id}">Timeline</a></p>
              ${messageView(page, selected.row, selected.images, here(selected.row.id), selected.part)}
            </section>`
          : ''
      }
    </div>`,
  );
}
