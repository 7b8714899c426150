/* src/hooks.hpp — every hook and callback pqrun registers (hooks.cpp). */
#pragma once

namespace pqrun::hooks {

/* Install registers the transaction and subtransaction callbacks, the
 * executor-start and utility hooks and the relcache callback; from
 * _PG_init, once per process. */
void Install();

/* InstallSharedMemory registers the shared-memory request and startup hooks;
 * from _PG_init, only when preloaded. */
void InstallSharedMemory();

} // namespace pqrun::hooks
