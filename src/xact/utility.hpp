/* src/xact/utility.hpp — what pqrun does around a utility command (utility.cpp),
 * called by the ProcessUtility hook (hooks.cpp). */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::utility {

/* Before runs before the command `stmt` (the PlannedStmt's utilityStmt). */
void Before(Node *stmt);

/* After runs after it, when it succeeded. */
void After(Node *stmt);

} // namespace pqrun::utility
