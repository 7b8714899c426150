#!/usr/bin/env node
'use strict';
// pqrun's web dashboard: `node server.js` (or `npm start`); --help lists the settings.
const { parse, ConfigError } = require('./lib/config');
const { hashPassword } = require('./lib/auth');
const { start } = require('./lib/app');
const { StartupError } = require('./lib/db');

async function readPassword() {
  if (process.stdin.isTTY) process.stderr.write('Password: ');
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

async function main() {
  let config;
  try {
    config = parse();
  } catch (err) {
    if (err instanceof ConfigError) { process.stderr.write(`pqrun-dashboard: ${err.message}\n`); return 2; }
    throw err;
  }
  if (config.help) { process.stdout.write(config.help); return 0; }
  if (config.hashPassword) {
    const password = await readPassword();
    if (password.length < 8) { process.stderr.write('pqrun-dashboard: a password of 8 characters at least\n'); return 2; }
    process.stdout.write(`${await hashPassword(password)}\n`);
    return 0;
  }
  let app;
  try {
    app = await start(config);
  } catch (err) {
    if (err instanceof StartupError || err.code === 'EADDRINUSE' || err.code === 'EACCES') {
      process.stderr.write(`pqrun-dashboard: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const { info } = app;
  process.stdout.write(`pqrun-dashboard: ${app.url}/ (${config.metricsOnly ? 'metrics only' : info.readOnly ? 'read-only' : 'operator'}, ` +
    `${info.role}@${info.database}, pqrun ${info.version})\n`);
  const stop = () => { app.close().then(() => process.exit(0)); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return null;
}

main().then((code) => { if (code !== null) process.exitCode = code; }, (err) => {
  process.stderr.write(`pqrun-dashboard: ${err.stack}\n`);
  process.exitCode = 1;
});
