/* src/pqrun.cpp — the module's magic block and _PG_init.
 *
 * _PG_init defines the settings and, when loaded through
 * shared_preload_libraries, requests shared memory and registers the
 * background launcher. Loaded any other way, the SQL API still works.
 */
#include "bgw.hpp"
#include "boundary.hpp"
#include "guc.hpp"
#include "shmem.hpp"
#include "utility_hook.hpp"
#include "wake.hpp"

extern "C" {
PQRUN_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace {

void
Init()
{
	pqrun::guc::Define();
	pqrun::wake::InstallCallbacks();
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;
	pqrun::shmem::InstallHooks();
	pqrun::bgw::RegisterLauncher();
	pqrun::InstallUtilityHook();
}

} // namespace

extern "C" void
_PG_init(void)
{
	pqrun::GuardedEntry(Init);
}
