/* src/bgw/bgw.hpp — pqrun's background workers (launcher in launcher.cpp,
 * per-database maintenance worker in worker.cpp). */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::bgw {

/* RegisterLauncher registers the static launcher; only valid while
 * shared_preload_libraries is being processed. */
void RegisterLauncher();

} // namespace pqrun::bgw

extern "C" {
PGDLLEXPORT void pqrun_launcher_main(Datum arg);
PGDLLEXPORT void pqrun_maintenance_main(Datum arg);
}
