/* src/jobs/pick_filter.hpp — what a pickup asks for, as one value.
 *
 * Everywhere a pickup's filter goes takes a PickFilter: the choice of the
 * SQL pick (pick.cpp's table of statements), the direct pick and the lanes
 * (pick_direct.hpp, pick_lanes.hpp), the waiter's registration
 * (wake.hpp), the flow controls that apply (flow_control.hpp) and the
 * promotion of due jobs. A filter a release adds is a field here, its
 * statement variants in that table, its predicate in pick_direct.cpp and
 * its hash in wake.cpp's Waiter.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun {

struct PickFilter {
	ArrayType *job_types = nullptr; /* nullptr: any */
	ArrayType *queues = nullptr;    /* nullptr: any */

	/* Any answers whether it lets every job through. */
	bool Any() const { return job_types == nullptr && queues == nullptr; }
};

} // namespace pqrun
