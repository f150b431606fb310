import type { ConsoleOverview, InstanceState } from '../console-data.types.js';
import { OUTBOX_STATUSES } from '../../outbox/mail.types.js';
import { latencyChart, throughputChart } from './charts.js';
import { html, type Markup } from './html.js';
import { layout, type PageContext, statusBadge, time } from './layout.js';

function duration(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** Rows by status (columns) and lane (rows), each count a link to the mails it counts. */
function countsTable(page: PageContext, overview: ConsoleOverview): Markup {
  const lanes = [...new Set(overview.counts.map((c) => c.lane))].sort();
  const countOf = (lane: string, status: string) =>
    overview.counts.find((c) => c.lane === lane && c.status === status) ?? { count: 0, estimated: false };
  const statuses = OUTBOX_STATUSES.filter((status) => overview.counts.some((c) => c.status === status));
  return html`<table class="counts" data-testid="counts">
    <thead>
      <tr>
        <th>lane</th>
        ${statuses.map((status) => html`<th>${statusBadge(status)}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${lanes.map(
        (lane) =>
          html`<tr>
            <th scope="row">${lane}</th>
            ${statuses.map((status) => {
              const { count, estimated } = countOf(lane, status);
              const href = `${page.base}/mails?status=${status}&lane=${encodeURIComponent(lane)}`;
              const shown = `${estimated ? '≈ ' : ''}${count.toLocaleString('en')}`;
              return html`<td
                data-lane="${lane}"
                data-status="${status}"
                title="${estimated ? 'estimated from the table statistics' : ''}"
              >
                ${count === 0 ? '0' : html`<a href="${href}">${shown}</a>`}
              </td>`;
            })}
          </tr>`,
      )}
    </tbody>
  </table>`;
}

function instancesTable(instances: InstanceState[]): Markup {
  if (instances.length === 0) return html`<p class="muted">No instance runs a dispatcher against this database.</p>`;
  return html`<table class="instances" data-testid="instances">
    <thead>
      <tr>
        <th>instance</th>
        <th>host · pid</th>
        <th>started</th>
        <th>heartbeat</th>
        <th>lanes</th>
      </tr>
    </thead>
    <tbody>
      ${instances.map(
        (instance) =>
          html`<tr class="${instance.stale ? 'stale' : ''}">
            <td>${instance.id}${instance.stale ? html` <span class="badge bad">no heartbeat</span>` : ''}</td>
            <td>${instance.host} · ${instance.pid}</td>
            <td>${time(instance.startedAt)}</td>
            <td>${time(instance.heartbeatAt)}</td>
            <td>
              ${Object.entries(instance.lanes).map(
                ([name, lane]) =>
                  html`<span class="lane lane-${lane.state}" title="${lane.reason ?? ''}"
                    >${name}:
                    ${lane.state}${lane.inFlight > 0 ? ` (${lane.inFlight} in flight)` : ''}${
                      lane.until ? ` until ${lane.until}` : ''
                    }</span
                  > `,
              )}
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** The part of the overview that refreshes in place. */
export function overviewFigures(page: PageContext, overview: ConsoleOverview, chartHours: number): Markup {
  return html`<section class="cards">
      <div class="card">
        <span>backlog</span><strong data-testid="backlog">${overview.backlog.toLocaleString('en')}</strong>
      </div>
      <div class="card">
        <span>lag</span><strong data-testid="lag">${duration(overview.lagMs)}</strong>
        <small>oldest due ${time(overview.oldestDueAt)}</small>
      </div>
      <div class="card ${overview.deadLetters > 0 ? 'bad' : ''}">
        <span>dead letters, 24 h</span>
        <strong data-testid="dead-letters"><a href="${page.base}/mails?status=dead">${overview.deadLetters}</a></strong>
      </div>
      <div class="card">
        <span>suppressed addresses</span>
        <strong data-testid="suppressions"><a href="${page.base}/suppressions">${overview.suppressions}</a></strong>
      </div>
    </section>
    <h2>Mails by status and lane</h2>
    ${countsTable(page, overview)}
    <h2>Instances</h2>
    ${instancesTable(overview.instances)}
    <h2>Throughput, last ${chartHours} h</h2>
    ${throughputChart(overview.minutes)}
    <h2>Latency, last ${chartHours} h</h2>
    ${latencyChart(overview.minutes)}`;
}

export function overviewPage(
  page: PageContext,
  overview: ConsoleOverview,
  options: { chartHours: number; refreshIntervalMs: number },
): Markup {
  return layout(
    page,
    'Overview',
    '',
    html`<p class="muted">
        Refreshed every ${options.refreshIntervalMs / 1_000} s while this page is open (<span data-refreshed
          >${time(new Date())}</span
        >).
      </p>
      <div data-live="${page.base}/overview/figures" data-interval-ms="${options.refreshIntervalMs}">
        ${overviewFigures(page, overview, options.chartHours)}
      </div>`,
  );
}
