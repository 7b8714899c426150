/* src/pg/client_wait.cpp — a wait that ends the session when its client is
 * gone (client_wait.hpp). */
#include "pg/client_wait.hpp"

/* From libpq/libpq.h, which cannot be included here: it includes
 * libpq/libpq-be.h, which includes gssapi.h on builds with GSSAPI (Debian's),
 * a header of Kerberos's development package. Each backend's wait set on its
 * client socket, its latch and the postmaster, made by pq_init: the same on
 * PostgreSQL 15 to 18. */
extern "C" {
extern PGDLLIMPORT WaitEventSet *FeBeWaitSet;
}
#define FeBeWaitSetSocketPos 0

namespace pqrun::client_wait {

bool
Sleep(long ms, uint32 wait_event)
{
	if (FeBeWaitSet == nullptr || MyProcPort == nullptr || whereToSendOutput != DestRemote ||
	    !WaitEventSetCanReportClosed())
		return (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, wait_event) & WL_LATCH_SET) != 0;
	/* As pq_check_connection does: every wait on this set sets the socket's
	 * events it waits for. */
	ModifyWaitEvent(FeBeWaitSet, FeBeWaitSetSocketPos, WL_SOCKET_CLOSED, nullptr);
	WaitEvent events[3];
	int n = WaitEventSetWait(FeBeWaitSet, ms, events, lengthof(events), wait_event);
	bool latch = false;
	for (int i = 0; i < n; i++) {
		if (events[i].events & WL_POSTMASTER_DEATH)
			ereport(FATAL, (errcode(ERRCODE_ADMIN_SHUTDOWN),
			                errmsg("terminating connection due to unexpected postmaster exit")));
		if (events[i].events & WL_SOCKET_CLOSED) {
			/* ProcessInterrupts ends the session as for any client lost. */
			ClientConnectionLost = true;
			InterruptPending = true;
		}
		latch = latch || (events[i].events & WL_LATCH_SET) != 0;
	}
	return latch;
}

} // namespace pqrun::client_wait
