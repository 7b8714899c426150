/* src/pg/client_wait.hpp — a wait that ends the session when its client is
 * gone.
 *
 * A backend notices that its client went away (the worker process killed,
 * its host gone) only when it next reads the socket, or at
 * client_connection_check_interval (0 by default). A session asleep in a
 * waiting pickup or heartbeat would hold its claims (pqrun.claim_hold =
 * session) until its wait ended, up to a minute: orphan rescue rightly sees
 * its backend alive. Waits therefore also watch the client's socket, and a
 * client gone ends the session at once, as PostgreSQL ends one whose client
 * it finds gone ("connection to client lost").
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::client_wait {

/* Sleep waits, as WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT |
 * WL_EXIT_ON_PM_DEATH, ms, wait_event) does, and answers whether the latch
 * was set; a client gone meanwhile ends the session at the next
 * CHECK_FOR_INTERRUPTS. Outside a client's backend (a background worker),
 * it is that WaitLatch. */
bool Sleep(long ms, uint32 wait_event);

} // namespace pqrun::client_wait
