/* src/pqrun.cpp — the module's magic block and _PG_init.
 *
 * _PG_init defines the settings and, when loaded through
 * shared_preload_libraries, requests shared memory and registers the
 * background launcher. Loaded any other way, the SQL API still works.
 */
#include "guc.hpp"
#include "hooks.hpp"
#include "bgw/bgw.hpp"
#include "pg/boundary.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

extern "C" {
PQRUN_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace {

/* TuneMalloc raises glibc's trim threshold. Each pqrun call frees its SPI
 * and executor memory at once; with the default 128kB threshold glibc hands
 * the top of the heap back to the kernel after almost every call and takes
 * it back, with page faults, on the next (about a fifth of a pickup's CPU).
 * Set in the postmaster, it holds for every backend forked from it; the
 * setting exists only when pqrun is preloaded. */
void
TuneMalloc()
{
#ifdef __GLIBC__
	if (pqrun_malloc_trim_threshold > 0)
		(void)mallopt(M_TRIM_THRESHOLD, pqrun_malloc_trim_threshold * 1024);
#endif
}

void
Init()
{
	pqrun::guc::Define();
	pqrun::hooks::Install();
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;
	TuneMalloc();
	pqrun::hooks::InstallSharedMemory();
	pqrun::bgw::RegisterLauncher();
}

} // namespace

extern "C" void
_PG_init(void)
{
	pqrun::GuardedEntry(Init);
}
