'use strict';
// The throughput chart, drawn here as SVG: a few polylines need no
// library, no script in the browser, and pass a CSP without inline code.
const { escape } = require('./html');

const LINES = [
  { key: 'done', label: 'done/min', color: '#2e7d32' },
  { key: 'errors', label: 'failed/min', color: '#c62828' },
  { key: 'enqueued', label: 'enqueued/min', color: '#1565c0' },
  { key: 'picked', label: 'picked up/min', color: '#9e9e9e', dash: '4 3' },
];

// scale(max): a tick step of 1, 2 or 5 times a power of ten, at most five
// steps up to a top at or above max.
function scale(max) {
  if (max <= 0) return { step: 1, top: 4 };
  const p = 10 ** Math.floor(Math.log10(max / 5));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => max / s <= 5);
  return { step, top: step * Math.max(1, Math.ceil(max / step)) };
}

function hhmm(t) {
  const d = new Date(t);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

function label(v) {
  return v >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v * 10) / 10);
}

// svg(points, { now, spanMs, title }): the chart of points [{t, done, errors, ...}]
// over the last spanMs (by default: since the first point, from 5 to 60 minutes).
function svg(points, { now = Date.now(), spanMs, title = 'Throughput', width = 960, height = 220 } = {}) {
  if (!spanMs) spanMs = Math.min(3600e3, Math.max(300e3, points.length ? now - points[0].t : 0));
  const m = { l: 48, r: 12, t: 28, b: 24 };
  const w = width - m.l - m.r;
  const h = height - m.t - m.b;
  const t0 = now - spanMs;
  const { step: yStep, top: max } = scale(Math.max(0, ...points.filter((p) => p.t >= now - spanMs).flatMap((p) => LINES.map((l) => p[l.key]))));
  const x = (t) => m.l + ((t - t0) / spanMs) * w;
  const y = (v) => m.t + h - (v / max) * h;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" ` +
    `font-family="system-ui, sans-serif" font-size="11" role="img" aria-label="${escape(title)}">`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${m.l}" y="16" font-size="13" font-weight="600" fill="#222">${escape(title)}</text>`);
  let lx = width - m.r;
  for (const l of [...LINES].reverse()) {
    const tw = Math.ceil(l.label.length * 6.4) + 36;
    lx -= tw;
    out.push(`<line x1="${lx}" y1="12" x2="${lx + 14}" y2="12" stroke="${l.color}" stroke-width="2"${l.dash ? ` stroke-dasharray="${l.dash}"` : ''}/>`);
    out.push(`<text x="${lx + 18}" y="16" fill="#444">${l.label}</text>`);
  }
  for (let v = 0; v <= max + yStep / 2; v += yStep) {
    const yy = y(v).toFixed(1);
    out.push(`<line x1="${m.l}" y1="${yy}" x2="${m.l + w}" y2="${yy}" stroke="#e3e3e3"/>`);
    out.push(`<text x="${m.l - 6}" y="${Number(yy) + 4}" text-anchor="end" fill="#666">${label(v)}</text>`);
  }
  const step = spanMs <= 10 * 60 * 1000 ? 60 * 1000 : spanMs <= 30 * 60 * 1000 ? 5 * 60 * 1000 : 10 * 60 * 1000;
  for (let t = Math.ceil(t0 / step) * step; t <= now; t += step) {
    const xx = x(t).toFixed(1);
    out.push(`<line x1="${xx}" y1="${m.t}" x2="${xx}" y2="${m.t + h}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${xx}" y="${height - 6}" text-anchor="middle" fill="#666">${hhmm(t)}</text>`);
  }
  out.push(`<line x1="${m.l}" y1="${m.t + h}" x2="${m.l + w}" y2="${m.t + h}" stroke="#999"/>`);
  const shown = points.filter((p) => p.t >= t0);
  if (shown.length < 2) {
    out.push(`<text x="${m.l + w / 2}" y="${m.t + h / 2}" text-anchor="middle" fill="#888">` +
      'collecting samples (each point: the last five minutes, per minute)</text>');
  } else {
    for (const l of LINES) {
      const pts = shown.map((p) => `${x(p.t).toFixed(1)},${y(p[l.key]).toFixed(1)}`).join(' ');
      out.push(`<polyline points="${pts}" fill="none" stroke="${l.color}" stroke-width="${l.dash ? 1.5 : 2}"` +
        `${l.dash ? ` stroke-dasharray="${l.dash}"` : ''} stroke-linejoin="round"/>`);
    }
  }
  out.push('</svg>');
  return out.join('\n');
}

module.exports = { svg, LINES };
