/* src/utility_hook.hpp — the ProcessUtility hook (utility_hook.cpp). */
#pragma once

namespace pqrun {

/* InstallUtilityHook chains pqrun's ProcessUtility hook; called by _PG_init. */
void InstallUtilityHook();

} // namespace pqrun
