/* src/guc.hpp — pqrun's settings (pqrun.*), defined in guc.cpp. */
#pragma once

#include "pure/backoff.hpp"

extern "C" {
extern bool pqrun_enabled;
extern int pqrun_reap_interval; /* ms */
extern int pqrun_count_interval; /* ms, 0 = off */
extern int pqrun_stale_timeout; /* s */
extern bool pqrun_orphan_rescue;
/* pqrun.claim_hold: whether the claims a session makes end with it. */
enum { PQRUN_HOLD_LEASE, PQRUN_HOLD_SESSION };
extern int pqrun_claim_hold;
extern char *pqrun_backoff;
extern char *pqrun_cron_timezone;
extern int pqrun_retention; /* s, 0 = keep */
extern int pqrun_failed_retention; /* s, 0 = keep, -1 = pqrun_retention */
extern int pqrun_history_interval; /* s */
extern int pqrun_max_payload_bytes;
extern bool pqrun_notify;
extern bool pqrun_synchronous_pickup;
extern bool pqrun_deferred_claims;
extern int pqrun_malloc_trim_threshold; /* kB, 0 = glibc's default */
}

namespace pqrun::guc {

/* Define registers every pqrun.* setting; called once from _PG_init. */
void Define();

/* PinSearchPath sets search_path to pg_catalog, pg_temp for what runs with
 * the extension owner's rights on a caller's behalf, outside the SECURITY
 * DEFINER functions that pin it themselves (deferred claims written at a
 * query's start or at commit): the caller's own path could put its
 * operators and functions in front of pg_catalog's. Answers the GUC nesting
 * level to give Unpin on success; an error unwinds it with the
 * (sub)transaction. */
int PinSearchPath();
void Unpin(int nest_level);

/* Backoff is the parsed pqrun.backoff currently in effect. */
const backoff::Schedule &Backoff();

} // namespace pqrun::guc
