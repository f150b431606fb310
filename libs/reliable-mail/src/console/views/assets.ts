// The console's only stylesheet and script, served from the package by the console's own routes: no CDN, no
// build step, nothing fetched at run time. The script only refreshes the overview in place; every page works
// without it.

export const CONSOLE_CSS = `
:root { color-scheme: light dark; --fg: #1d2327; --muted: #6b7280; --line: #d9dde3; --bg: #fff; --head: #f4f5f7;
  --ok: #15803d; --bad: #b91c1c; --warn: #b45309; --accent: #1d4ed8; }
@media (prefers-color-scheme: dark) { :root { --fg: #e5e7eb; --muted: #9ca3af; --line: #374151; --bg: #111827;
  --head: #1f2937; --ok: #4ade80; --bad: #f87171; --warn: #fbbf24; --accent: #93c5fd; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem; background: var(--head);
  border-bottom: 1px solid var(--line); }
header nav { display: flex; gap: 1rem; flex: 1; }
header a { color: var(--fg); text-decoration: none; }
header a[aria-current] { font-weight: 600; border-bottom: 2px solid var(--accent); }
main { padding: 1rem 1.2rem 3rem; max-width: 1200px; }
h1 { font-size: 1.3rem; margin: .2rem 0 1rem; } h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { background: var(--head); font-weight: 600; }
code { font-size: 12px; word-break: break-all; }
.muted, small { color: var(--muted); }
.badge { font-size: 11px; padding: 0 .4rem; border: 1px solid var(--line); border-radius: 8px; }
.badge.bad, .error { color: var(--bad); }
.status { font-size: 12px; padding: .05rem .45rem; border-radius: 8px; border: 1px solid currentColor; }
.status-sent { color: var(--ok); } .status-failed, .status-dead { color: var(--bad); }
.status-pending, .status-sending { color: var(--accent); } .status-suppressed, .status-expired { color: var(--warn); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: .8rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem; display: flex; flex-direction: column; }
.card strong { font-size: 1.6rem; } .card.bad strong a { color: var(--bad); }
.lane { font-size: 12px; margin-right: .4rem; } .lane-outage, .lane-paused { color: var(--bad); }
.lane-running { color: var(--ok); } tr.stale { opacity: .6; }
figure { margin: 0; } svg { width: 100%; height: auto; border: 1px solid var(--line); }
svg .sent { fill: var(--ok); } svg .failed { fill: var(--bad); } svg .deferred { fill: var(--warn); }
svg polyline { fill: none; stroke-width: 1.5; } svg .p50 { stroke: var(--accent); } svg .p95 { stroke: var(--warn); }
svg circle.p50 { fill: var(--accent); } svg circle.p95 { fill: var(--warn); }
svg .axis { font-size: 10px; fill: var(--muted); }
.key { display: inline-block; width: .8em; height: .8em; } .key.sent { background: var(--ok); }
.key.failed { background: var(--bad); } .key.deferred, .key.p95 { background: var(--warn); } .key.p50 { background: var(--accent); }
form.filter { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; margin-bottom: 1rem; }
form.filter label, form.action label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
input, select, button { font: inherit; padding: .25rem .4rem; }
button, a.button { background: var(--accent); color: #fff; border: 0; border-radius: 4px; padding: .35rem .8rem;
  text-decoration: none; cursor: pointer; }
form.action { display: flex; flex-direction: column; gap: .6rem; max-width: 32rem; }
.notice { border-left: 4px solid var(--ok); padding: .4rem .8rem; background: var(--head); }
.warning { border-left: 4px solid var(--warn); padding: .4rem .8rem; background: var(--head); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
ol.timeline { list-style: none; padding: 0; border-left: 2px solid var(--line); margin-left: .4rem; }
ol.timeline li { padding: .4rem .8rem; } .reply { font-family: monospace; font-size: 12px; white-space: pre-wrap; }
ul.recipients { margin: .2rem 0; }
iframe { width: 100%; height: 480px; border: 1px solid var(--line); background: #fff; }
.preview { display: grid; grid-template-columns: minmax(14rem, 1fr) 2.5fr; gap: 1.2rem; align-items: start; }
.preview-list { list-style: none; margin: 0; padding: 0; border-top: 1px solid var(--line); }
.preview-list li { padding: .4rem .3rem; border-bottom: 1px solid var(--line); display: grid; gap: .1rem; }
.preview-list li[aria-current] { background: var(--head); border-left: 3px solid var(--accent); }
`;

export const CONSOLE_JS = `
(() => {
  const live = document.querySelector('[data-live]');
  if (!live) return;
  const interval = Number(live.dataset.intervalMs) || 5000;
  const stamp = document.querySelector('[data-refreshed]');
  const refresh = async () => {
    if (document.hidden) return;
    try {
      const answer = await fetch(live.dataset.live, { credentials: 'same-origin', headers: { accept: 'text/html' } });
      if (!answer.ok) return;
      live.innerHTML = await answer.text();
      if (stamp) stamp.textContent = new Date().toISOString().replace('T', ' ').slice(0, 23) + 'Z';
    } catch {}
  };
  setInterval(refresh, interval);
})();
`;
