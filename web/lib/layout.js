'use strict';
// The frame of every page and the small pieces pages share.
const { html } = require('./html');
const fmt = require('./format');

const NAV = [['/', 'Queues'], ['/jobs', 'Jobs'], ['/running', 'Running'], ['/schedules', 'Schedules'], ['/health', 'Health']];

function page(ctx, { title, body, active = '', refresh = 0 }) {
  const info = ctx.info;
  const mode = info.readOnly ? 'read-only' : 'operator';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refresh ? html`<meta http-equiv="refresh" content="${refresh}">` : ''}
<title>${title} · pqrun</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header>
  <a class="brand" href="/">pqrun</a>
  <nav>${NAV.map(([href, label]) => html`<a href="${href}"${active === href ? html` class="active"` : ''}>${label}</a>`)}</nav>
  <span class="who" title="PostgreSQL ${info.server_version}, pqrun ${info.version}">${info.role}@${info.database} · <span class="mode mode-${mode}">${mode}</span></span>
</header>
<main>
${ctx.flash ? html`<p class="flash${ctx.flash.startsWith('Error') ? ' flash-error' : ''}" role="status">${ctx.flash}</p>` : ''}
<h1>${title}</h1>
${body}
</main>
<footer>pqrun ${info.version} · times in UTC · ${fmt.time(ctx.now)}</footer>
</body>
</html>`;
}

// A POST form: hidden fields, the CSRF token and one button (or the
// inputs given). `confirm` asks before sending (public/app.js).
function postForm(ctx, action, { hidden = {}, inputs = '', button, confirm = '', cls = '' }) {
  return html`<form method="post" action="${action}" class="inline ${cls}"${confirm ? html` data-confirm="${confirm}"` : ''}>
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<input type="hidden" name="back" value="${ctx.url.pathname}${ctx.url.search}">
${Object.entries(hidden).filter(([, v]) => v !== undefined && v !== null && v !== '').map(([k, v]) =>
    (Array.isArray(v) ? v : [v]).map((x) => html`<input type="hidden" name="${k}" value="${x}">`))}
${inputs}<button type="submit">${button}</button></form>`;
}

function statusBadge(status) {
  return html`<span class="status status-${String(status).toLowerCase()}">${status}</span>`;
}

function jobLink(id) {
  return html`<a href="/jobs/${id}">#${id}</a>`;
}

function queueLink(queue) {
  return html`<a href="/queues/${encodeURIComponent(queue)}">${queue}</a>`;
}

function when(value, now) {
  if (!value) return '–';
  return html`<time datetime="${new Date(value).toISOString()}" title="${fmt.ago(value, now)}">${fmt.time(value)}</time>`;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    for (const x of Array.isArray(v) ? v : [v]) q.append(k, String(x));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

module.exports = { page, postForm, statusBadge, jobLink, queueLink, when, query };
