/* src/jobs/flow_control_report.cpp — the rows behind
 * pqrun.queue_controls: what shared memory counts for each limit and rate
 * limit of this database (flow_control_state.hpp). */
#include "jobs/flow_control_state.hpp"

namespace pqrun::flow_control {

using namespace detail;

void
Report(Tuplestorestate *out, TupleDesc desc)
{
	if (shared == nullptr)
		return;
	struct Row {
		int64 id;
		int32 used;
		double tokens;
		TimestampTz refilled_at;
	};
	Row rows[kMaxCounters];
	int n = 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const Counter &k : shared->counters)
		if (k.dboid == MyDatabaseId)
			rows[n++] = Row{k.control_id, k.used, k.tokens, k.refilled_at};
	LWLockRelease(shared->lock);
	for (int i = 0; i < n; i++) {
		Datum values[4] = {Int64GetDatum(rows[i].id), Int32GetDatum(rows[i].used), Float8GetDatum(rows[i].tokens),
		                   TimestampTzGetDatum(rows[i].refilled_at)};
		bool nulls[4] = {false, false, false, false};
		tuplestore_putvalues(out, desc, values, nulls);
	}
}

void
ReportKeyBuckets(Tuplestorestate *out, TupleDesc desc)
{
	if (shared == nullptr)
		return;
	struct Row {
		int64 id;
		int32 keys;
		int32 without_token;
	};
	Row rows[kMaxCounters];
	int n = 0;
	TimestampTz now = GetCurrentTimestamp();
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const KeyBucket &b : shared->key_buckets) {
		if (b.dboid != MyDatabaseId)
			continue;
		double tokens = Refilled(b.tokens, b.refilled_at, b.rate, b.burst, now);
		if (tokens >= b.burst)
			continue; /* full: as good as none */
		int i = 0;
		while (i < n && rows[i].id != b.control_id)
			i++;
		if (i == n) {
			if (n == kMaxCounters)
				continue; /* a bucket of a control gone meanwhile */
			rows[n++] = Row{b.control_id, 0, 0};
		}
		rows[i].keys++;
		rows[i].without_token += tokens < 1;
	}
	LWLockRelease(shared->lock);
	for (int i = 0; i < n; i++) {
		Datum values[3] = {Int64GetDatum(rows[i].id), Int32GetDatum(rows[i].keys),
		                   Int32GetDatum(rows[i].without_token)};
		bool nulls[3] = {false, false, false};
		tuplestore_putvalues(out, desc, values, nulls);
	}
}

} // namespace pqrun::flow_control
