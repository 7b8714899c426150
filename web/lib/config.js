'use strict';
// Settings from the environment, each of which a command-line flag may
// override. Defaults are the safe ones: loopback only, authentication
// required, payloads hidden, superusers refused.

const USAGE = `Usage: node server.js [options]

Options (each also an environment variable):
  --listen HOST          PQRUN_DASHBOARD_LISTEN         address to listen on (127.0.0.1)
  --port N               PQRUN_DASHBOARD_PORT           port (5480)
  --database URL         PQRUN_DASHBOARD_DATABASE_URL   connection string (else DATABASE_URL, else PGHOST, PGPORT,
                                                        PGDATABASE, PGUSER, PGPASSWORD...)
  --read-only            PQRUN_DASHBOARD_READ_ONLY=1    hide actions and refuse them (also when the role
                                                        has only pqrun.grant_monitor's rights)
  --metrics-only         PQRUN_DASHBOARD_METRICS_ONLY=1 serve /metrics and nothing else
  --metrics-public       PQRUN_DASHBOARD_METRICS_PUBLIC=1  /metrics without authentication
  --show-payloads        PQRUN_DASHBOARD_SHOW_PAYLOADS=1   show payloads and results without asking
  --allow-superuser      PQRUN_DASHBOARD_ALLOW_SUPERUSER=1 connect as a superuser anyway
  --no-auth              PQRUN_DASHBOARD_NO_AUTH=1      no authentication (only on a loopback address)
  --secure-cookies       PQRUN_DASHBOARD_SECURE_COOKIES=1  cookies only over HTTPS (behind a TLS proxy)
  --hash-password        read a password on stdin, print its hash for PQRUN_DASHBOARD_PASSWORD_HASH

Authentication (environment only):
  PQRUN_DASHBOARD_USER and PQRUN_DASHBOARD_PASSWORD_HASH   HTTP basic (the hash from --hash-password)
  PQRUN_DASHBOARD_TOKEN                                    a bearer token (Authorization: Bearer ...)

Tuning: PQRUN_DASHBOARD_PAGE_SIZE (50), PQRUN_DASHBOARD_SCAN_WINDOW (20000 jobs examined per list
request), PQRUN_DASHBOARD_SAMPLE_SECONDS (10), PQRUN_DASHBOARD_STATEMENT_TIMEOUT_MS (10000),
PQRUN_DASHBOARD_BULK_TIMEOUT_MS (600000), PQRUN_DASHBOARD_SECRET (signs cookies; random at start).
`;

const FLAGS = {
  '--read-only': 'READ_ONLY', '--metrics-only': 'METRICS_ONLY', '--metrics-public': 'METRICS_PUBLIC',
  '--show-payloads': 'SHOW_PAYLOADS', '--allow-superuser': 'ALLOW_SUPERUSER', '--no-auth': 'NO_AUTH',
  '--secure-cookies': 'SECURE_COOKIES',
};
const VALUED = { '--listen': 'LISTEN', '--port': 'PORT', '--database': 'DATABASE_URL' };

class ConfigError extends Error {}

function truthy(v) { return v !== undefined && v !== '' && !/^(0|false|no|off)$/i.test(v); }

function intSetting(env, name, dflt, min, max) {
  const v = env[`PQRUN_DASHBOARD_${name}`];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`PQRUN_DASHBOARD_${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(v)}`);
  }
  return n;
}

// parse(argv, env): the settings, or { help } / { hashPassword }.
function parse(argv = process.argv.slice(2), env = process.env) {
  const e = { ...env };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') return { help: USAGE };
    if (a === '--hash-password') return { hashPassword: true };
    if (FLAGS[a]) { e[`PQRUN_DASHBOARD_${FLAGS[a]}`] = '1'; continue; }
    const [flag, inline] = a.split(/=(.*)/s);
    if (VALUED[flag]) {
      const v = inline !== undefined ? inline : argv[++i];
      if (v === undefined) throw new ConfigError(`${flag} needs a value`);
      e[`PQRUN_DASHBOARD_${VALUED[flag]}`] = v;
      continue;
    }
    throw new ConfigError(`unknown option ${a} (--help lists them)`);
  }
  const flag = (name) => truthy(e[`PQRUN_DASHBOARD_${name}`]);
  const config = {
    listen: e.PQRUN_DASHBOARD_LISTEN || '127.0.0.1',
    port: intSetting(e, 'PORT', 5480, 0, 65535),
    connectionString: e.PQRUN_DASHBOARD_DATABASE_URL || e.DATABASE_URL || undefined,
    readOnly: flag('READ_ONLY'),
    metricsOnly: flag('METRICS_ONLY'),
    metricsPublic: flag('METRICS_PUBLIC'),
    showPayloads: flag('SHOW_PAYLOADS'),
    allowSuperuser: flag('ALLOW_SUPERUSER'),
    noAuth: flag('NO_AUTH'),
    secureCookies: flag('SECURE_COOKIES'),
    user: e.PQRUN_DASHBOARD_USER || '',
    passwordHash: e.PQRUN_DASHBOARD_PASSWORD_HASH || '',
    token: e.PQRUN_DASHBOARD_TOKEN || '',
    secret: e.PQRUN_DASHBOARD_SECRET || '',
    pageSize: intSetting(e, 'PAGE_SIZE', 50, 1, 1000),
    scanWindow: intSetting(e, 'SCAN_WINDOW', 20000, 100, 1000000),
    sampleSeconds: intSetting(e, 'SAMPLE_SECONDS', 10, 1, 3600),
    statementTimeoutMs: intSetting(e, 'STATEMENT_TIMEOUT_MS', 10000, 100, 3600000),
    bulkTimeoutMs: intSetting(e, 'BULK_TIMEOUT_MS', 600000, 1000, 86400000),
  };
  check(config);
  return config;
}

function isLoopback(host) {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

function check(c) {
  if ((c.user === '') !== (c.passwordHash === '')) {
    throw new ConfigError('set both PQRUN_DASHBOARD_USER and PQRUN_DASHBOARD_PASSWORD_HASH (or neither)');
  }
  if (c.passwordHash && !/^scrypt\$/.test(c.passwordHash)) {
    throw new ConfigError('PQRUN_DASHBOARD_PASSWORD_HASH is not a hash of --hash-password (scrypt$...)');
  }
  const auth = c.user !== '' || c.token !== '';
  const needsAuth = !(c.metricsOnly && c.metricsPublic);
  if (needsAuth && !auth && !c.noAuth) {
    throw new ConfigError('no authentication configured: set PQRUN_DASHBOARD_USER and PQRUN_DASHBOARD_PASSWORD_HASH ' +
      '(node server.js --hash-password makes the hash) or PQRUN_DASHBOARD_TOKEN, or pass --no-auth');
  }
  if (c.noAuth && !isLoopback(c.listen)) {
    throw new ConfigError(`--no-auth only on a loopback address, not ${c.listen}`);
  }
  if (c.noAuth && auth) throw new ConfigError('--no-auth and credentials together: choose one');
}

module.exports = { parse, USAGE, ConfigError, isLoopback };
