/* src/hooks.hpp — every hook and callback pqrun registers (hooks.cpp). */
#pragma once

namespace pqrun::hooks {

/* Install registers the transaction and subtransaction callbacks, the
 * executor-start and utility hooks and the relcache callback; from
 * _PG_init, once per process. */
void Install();

} // namespace pqrun::hooks
