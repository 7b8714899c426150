'use strict';
// HTML built with a tagged template that escapes every interpolated value,
// so that markup comes only from this code's literals: a job's payload,
// error or queue name can never become markup.

class Safe {
  constructor(text) { this.text = text; }
  toString() { return this.text; }
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

function escape(value) {
  return String(value).replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

// render(value): markup for one interpolated value. Arrays are joined, null
// and undefined and false are nothing, Safe is kept, anything else escaped.
function render(value) {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Safe) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escape(value);
}

function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Safe(out);
}

// raw(text): markup this code made itself (an SVG it drew).
function raw(text) { return new Safe(String(text)); }

module.exports = { html, raw, escape, Safe };
