// cancelRequest asks the server (or the pooler in front of it) to cancel the
// statement a client is running: the protocol's CancelRequest on a fresh
// connection, as libpq's PQcancel does. Like libpq it then waits for the
// other side to close the connection (the promise resolves then, or after
// 5 s): PgBouncer 1.18 (Debian 12) crashes when a cancel connection goes
// away before it has forwarded the request (pgbouncer/pgbouncer#801).

import net from 'node:net';

const CANCEL_REQUEST_CODE = 80877102;

export function cancelRequest(client) {
  if (!client?.processID) return Promise.resolve();
  return new Promise((resolve) => {
    const socket = client.host && client.host.startsWith('/')
      ? net.connect(`${client.host}/.s.PGSQL.${client.port}`)
      : net.connect(client.port, client.host);
    socket.setTimeout(5000, () => socket.destroy());
    socket.on('error', () => {});
    socket.on('close', resolve);
    socket.on('end', () => socket.end());
    socket.on('connect', () => {
      const msg = Buffer.alloc(16);
      msg.writeInt32BE(16, 0);
      msg.writeInt32BE(CANCEL_REQUEST_CODE, 4);
      msg.writeInt32BE(client.processID, 8);
      msg.writeInt32BE(client.secretKey, 12);
      socket.write(msg);
    });
  });
}
