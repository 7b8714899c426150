// The worker's default log: one line per event on stderr,
// `<time> <level> <message> key=value ...`.
export function stderrLog(level, message, fields = {}) {
  const kv = Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`)
    .join(' ');
  process.stderr.write(`${new Date().toISOString()} ${level} ${message}${kv ? ' ' + kv : ''}\n`);
}
