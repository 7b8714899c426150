/* src/bgw/maintenance.hpp — one maintenance round (maintenance.cpp). */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::maintenance {

/* Counts of one round, as reported by pqrun.run_maintenance(). */
struct Counts {
	int32 reaped;
	int64 orphaned;
	int64 scheduled;
	int64 unblocked;
	int64 promoted;
	int64 purged;
};

/* Run does one round in the current transaction; SPI must be connected. */
Counts Run();

} // namespace pqrun::maintenance
