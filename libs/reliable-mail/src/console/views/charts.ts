import type { MinuteFigures } from '../console-data.types.js';
import { html, type Markup, raw } from './html.js';

// Charts drawn on the server as SVG: no charting library to ship, nothing to run in the browser, and a page that
// reads the same with scripts off. Each is a fixed viewBox scaled by CSS.

const WIDTH = 720;
const HEIGHT = 140;

function scale(max: number): (value: number) => number {
  return (value) => (max === 0 ? HEIGHT : HEIGHT - (value / max) * (HEIGHT - 12));
}

function axisLabels(minutes: MinuteFigures[], max: number, unit: string): Markup {
  const first = minutes[0]?.minute;
  const last = minutes[minutes.length - 1]?.minute;
  const clock = (date: Date | undefined) => (date ? date.toISOString().slice(11, 16) : '');
  return html`<text x="2" y="10" class="axis">${max.toLocaleString('en')} ${unit}</text>
    <text x="2" y="${HEIGHT + 14}" class="axis">${clock(first)}Z</text>
    <text x="${WIDTH - 2}" y="${HEIGHT + 14}" class="axis" text-anchor="end">${clock(last)}Z</text>`;
}

/** Sent, failed and deferred per minute, stacked. */
export function throughputChart(minutes: MinuteFigures[]): Markup {
  const max = Math.max(0, ...minutes.map((m) => m.sent + m.failed + m.deferred));
  const y = scale(max);
  const width = WIDTH / Math.max(minutes.length, 1);
  const barWidth = Math.max(width - 0.5, 0.5).toFixed(2);
  const bars = minutes.map((m, index) => {
    const x = (index * width).toFixed(2);
    let below = 0;
    return (['sent', 'failed', 'deferred'] as const)
      .map((kind) => {
        const bottom = y(below);
        below += m[kind];
        const top = y(below);
        return m[kind] === 0
          ? ''
          : `<rect class="${kind}" x="${x}" y="${top.toFixed(1)}" width="${barWidth}" height="${(bottom - top).toFixed(1)}"/>`;
      })
      .join('');
  });
  return html`<figure>
    <svg viewBox="0 0 ${WIDTH} ${HEIGHT + 18}" role="img" aria-label="mails per minute">
      ${raw(bars.join(''))}${axisLabels(minutes, max, 'per minute')}
    </svg>
    <figcaption>
      <span class="key sent"></span> sent <span class="key failed"></span> failed
      <span class="key deferred"></span> deferred, per minute
    </figcaption>
  </figure>`;
}

/** Creation to sent, p50 and p95, of the mails sent each minute. */
export function latencyChart(minutes: MinuteFigures[]): Markup {
  const max = Math.max(0, ...minutes.flatMap((m) => [m.latencyP95Ms ?? 0, m.latencyP50Ms ?? 0]));
  const y = scale(max);
  const step = WIDTH / Math.max(minutes.length - 1, 1);
  const points = (pick: (m: MinuteFigures) => number | null) =>
    minutes.flatMap((m, index) => {
      const value = pick(m);
      return value === null ? [] : [[(index * step).toFixed(1), y(value).toFixed(1)]];
    });
  // A dot at each minute too: a minute with mail between two without draws no line.
  const line = (kind: string, pick: (m: MinuteFigures) => number | null) => {
    const at = points(pick);
    const dots = at.map(([x, top]) => `<circle class="${kind}" cx="${x}" cy="${top}" r="2"/>`).join('');
    return raw(`<polyline class="${kind}" points="${at.map((point) => point.join(',')).join(' ')}"/>${dots}`);
  };
  return html`<figure>
    <svg viewBox="0 0 ${WIDTH} ${HEIGHT + 18}" role="img" aria-label="latency from enqueue to sent">
      ${line('p95', (m) => m.latencyP95Ms)}${line('p50', (m) => m.latencyP50Ms)}
      ${axisLabels(minutes, Math.round(max), 'ms')}
    </svg>
    <figcaption><span class="key p50"></span> p50 <span class="key p95"></span> p95, enqueue to sent</figcaption>
  </figure>`;
}
