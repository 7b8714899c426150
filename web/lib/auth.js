'use strict';
// Who may look: HTTP basic against an scrypt hash, or a bearer token.
// Sessions exist only for CSRF: a random id in a SameSite=Strict cookie and
// a token derived from it (an HMAC) that every POST must carry.
const crypto = require('node:crypto');
const { promisify } = require('node:util');

const scrypt = promisify(crypto.scrypt);
const SCRYPT = { N: 32768, r: 8, p: 1, keylen: 32 };

function scryptOptions(N, r, p) { return { N, r, p, maxmem: 256 * N * r }; }

async function hashPassword(password) {
  const salt = crypto.randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT.keylen, scryptOptions(SCRYPT.N, SCRYPT.r, SCRYPT.p));
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), key.toString('base64')].join('$');
}

async function verifyPassword(password, stored) {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64');
  const expected = Buffer.from(parts[5], 'base64');
  if (![N, r, p].every(Number.isInteger) || expected.length === 0) return false;
  const key = await scrypt(password, salt, expected.length, scryptOptions(N, r, p));
  return crypto.timingSafeEqual(key, expected);
}

const sha256 = (s) => crypto.createHash('sha256').update(s).digest();
const sameText = (a, b) => crypto.timingSafeEqual(sha256(a), sha256(b));
const b64url = (buf) => buf.toString('base64url');

class Auth {
  constructor(config) {
    this.config = config;
    this.secret = config.secret ? sha256(config.secret) : crypto.randomBytes(32);
    // Authorization headers that passed scrypt lately: a page's every
    // request would otherwise cost a hash (tens of milliseconds of CPU).
    this.verified = new Map();
  }

  get enabled() { return !this.config.noAuth; }

  // check(req): true when the request may go on.
  async check(req) {
    if (!this.enabled) return true;
    const header = req.headers.authorization || '';
    const key = sha256(header).toString('hex');
    const until = this.verified.get(key);
    if (until && until > Date.now()) return true;
    const ok = await this.checkHeader(header);
    if (ok) {
      if (this.verified.size >= 64) this.verified.delete(this.verified.keys().next().value);
      this.verified.set(key, Date.now() + 5 * 60 * 1000);
    }
    return ok;
  }

  async checkHeader(header) {
    const { user, passwordHash, token } = this.config;
    const m = /^(\w+) +(.+)$/.exec(header);
    if (!m) return false;
    const scheme = m[1].toLowerCase();
    if (scheme === 'bearer' && token) return sameText(m[2].trim(), token);
    if (scheme === 'basic' && user) {
      const decoded = Buffer.from(m[2].trim(), 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return false;
      const userOk = sameText(decoded.slice(0, colon), user);
      const passOk = await verifyPassword(decoded.slice(colon + 1), passwordHash);
      return userOk && passOk;
    }
    return false;
  }

  challenge() {
    return this.config.user ? 'Basic realm="pqrun", charset="UTF-8"' : 'Bearer realm="pqrun"';
  }

  hmac(label, value) {
    return b64url(crypto.createHmac('sha256', this.secret).update(`${label}:${value}`).digest());
  }

  newSessionId() { return b64url(crypto.randomBytes(24)); }

  csrfToken(sid) { return this.hmac('csrf', sid); }

  checkCsrf(sid, token) {
    if (!sid || typeof token !== 'string' || token === '') return false;
    return sameText(token, this.csrfToken(sid));
  }

  // A message shown once on the next page, bound to the session.
  flashCookie(sid, message) {
    const text = b64url(Buffer.from(message, 'utf8'));
    return `${text}.${this.hmac(`flash:${sid}`, text)}`;
  }

  readFlash(sid, cookie) {
    if (!sid || !cookie) return null;
    const [text, mac] = cookie.split('.');
    if (!text || !mac || !sameText(mac, this.hmac(`flash:${sid}`, text))) return null;
    return Buffer.from(text, 'base64url').toString('utf8');
  }
}

function parseCookies(header) {
  const out = {};
  for (const part of (header || '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

module.exports = { Auth, hashPassword, verifyPassword, parseCookies };
