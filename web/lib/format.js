'use strict';
// How numbers, times and durations read on the pages (times in UTC).

function num(value) {
  if (value === null || value === undefined || value === '') return '–';
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

function pad(n) { return String(n).padStart(2, '0'); }

function time(value) {
  if (!value) return '–';
  const d = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
}

// seconds(s): a duration in seconds as "850 ms", "42 s", "3 min 5 s", "2 h 10 min", "3 d 4 h".
function seconds(s) {
  if (s === null || s === undefined) return '–';
  s = Number(s);
  if (!Number.isFinite(s)) return '–';
  const sign = s < 0 ? '-' : '';
  s = Math.abs(s);
  if (s < 1) return `${sign}${Math.round(s * 1000)} ms`;
  if (s < 60) return `${sign}${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${sign}${m} min ${Math.floor(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${sign}${h} h ${m % 60} min`;
  return `${sign}${Math.floor(h / 24)} d ${h % 24} h`;
}

function ms(value) {
  if (value === null || value === undefined) return '–';
  return seconds(Number(value) / 1000);
}

// ago(date, now): "5 min ago" or "in 5 min".
function ago(value, now = Date.now()) {
  if (!value) return '';
  const t = (value instanceof Date ? value : new Date(value)).getTime();
  const d = (now - t) / 1000;
  return d >= 0 ? `${seconds(d)} ago` : `in ${seconds(-d)}`;
}

function json(value) {
  if (value === null || value === undefined) return '';
  return JSON.stringify(value, null, 2);
}

module.exports = { num, time, seconds, ms, ago, json };
