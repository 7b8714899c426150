/* src/jobs/flow_control_copy.cpp — this backend's copy of
 * pqrun.queue_control, read whole or by queue after a change, and the
 * keyed marks a transaction notes (flow_control_state.hpp). */
#include "jobs/flow_control_state.hpp"

#include "guc.hpp"
#include "jobs/keyed_queues.hpp"
#include "xact/wake.hpp"

namespace pqrun::flow_control {

namespace stmts {

#define PQRUN_CONTROL_COLUMNS                                                                                          \
	"SELECT id, queue, job_type, paused, max_running, rate, burst" PQRUN_CONTROL_KEYS PQRUN_CONTROL_KEY_RATES          \
	" FROM pqrun.queue_control"
spi::Statement kLoadControls{"load controls", PQRUN_CONTROL_COLUMNS, 0, {}};

/* The controls of one queue, read again after a change of them. */
spi::Statement kLoadQueueControls{"load controls of a queue", PQRUN_CONTROL_COLUMNS " WHERE queue = $1", 1, {TEXTOID}};

/* Whether queue $1 is marked keyed. */
spi::Statement kMarked{"keyed mark",
                       "SELECT 1 FROM pqrun.queue_control WHERE queue = $1 AND job_type IS NULL"
                       "   AND concurrency_key IS NULL AND keyed",
                       1,
                       {TEXTOID}};

/* A queue whose jobs have keys: its pickups walk its lanes from now on. */
spi::Statement kNoteKeyed{"note keyed queue",
                          "INSERT INTO pqrun.queue_control AS c (queue, keyed) VALUES ($1, true)"
                          " ON CONFLICT (queue, job_type" PQRUN_JOB_KEY ") DO UPDATE SET keyed = true,"
                          "   updated_at = pg_catalog.now() WHERE NOT c.keyed",
                          1,
                          {TEXTOID}};

} // namespace stmts

namespace detail {

Control *controls = nullptr;
int ncontrols = 0;
bool cache_valid = false;
Oid cache_db = InvalidOid;
int nplaced = 0;           /* controls with a concurrency limit */
bool changed_here = false; /* this transaction changed the controls */
bool trigger_fired = false;
bool own_overflow = false;
uint64 own_seq = 0;
HTAB *noted_keyed = nullptr;

namespace {

int controls_room = 0;
uint64 cache_gen = 0;
char *own_names[kMaxOwn];
int own_lens[kMaxOwn];
int nown = 0;
uint64 own_read = 0;

/* The controls are sorted by queue (bytes, then length), so that the
 * controls of one queue are found by a binary search instead of a pass
 * over all of them: a claim, a row passed over, a key looked at cost as
 * much beside 10,000 controls as beside 10. */
int
CompareQueues(const char *a, int a_len, const char *b, int b_len)
{
	int c = memcmp(a, b, Min(a_len, b_len));
	return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

int
CompareControls(const void *a, const void *b)
{
	const auto *x = static_cast<const Control *>(a), *y = static_cast<const Control *>(b);
	return CompareQueues(x->queue, x->queue_len, y->queue, y->queue_len);
}

int
CompareIds(const void *a, const void *b)
{
	int64 x = (*static_cast<const Control *const *>(a))->id, y = (*static_cast<const Control *const *>(b))->id;
	return (x > y) - (x < y);
}

/* FillControl copies row `r` of the last SPI result into `c`, its strings
 * in the current memory context. */
void
FillControl(Control &c, uint64 r)
{
	bool isnull;
	c.id = spi::ColInt64(r, 1);
	c.queue = spi::ColText(r, 2);
	c.queue_len = strlen(c.queue);
	c.job_type = spi::ColText(r, 3);
	c.job_type_len = c.job_type ? strlen(c.job_type) : 0;
	c.paused = spi::ColBool(r, 4);
	Datum max = spi::Col(r, 5, &isnull);
	c.max_running = isnull ? -1 : DatumGetInt32(max);
	Datum rate = spi::Col(r, 6, &isnull);
	c.rate = isnull ? 0 : DatumGetFloat8(rate);
	Datum burst = spi::Col(r, 7, &isnull);
	c.burst = isnull ? 1 : DatumGetInt32(burst);
	c.key = spi::ColText(r, 8);
	c.key_len = c.key ? strlen(c.key) : 0;
	Datum per_key = spi::Col(r, 9, &isnull);
	c.max_per_key = isnull ? -1 : DatumGetInt32(per_key);
	c.keyed = spi::ColBool(r, 10);
	Datum rate_per_key = spi::Col(r, 11, &isnull);
	c.rate_per_key = isnull ? 0 : DatumGetFloat8(rate_per_key);
	Datum burst_per_key = spi::Col(r, 12, &isnull);
	c.burst_per_key = isnull ? 1 : DatumGetInt32(burst_per_key);
	c.counter = -1;
}

void
FreeStrings(Control &c)
{
	pfree(c.queue);
	if (c.job_type)
		pfree(c.job_type);
	if (c.key)
		pfree(c.key);
}

/* Room makes the copy hold at least `n` controls. */
void
Room(int n)
{
	if (n <= controls_room)
		return;
	int room = Max(n, controls_room * 2);
	controls = static_cast<Control *>(controls ? repalloc(controls, sizeof(Control) * room)
	                                           : MemoryContextAlloc(TopMemoryContext, sizeof(Control) * room));
	controls_room = room;
}

/* LoadQuery runs `stmt` (with `values`) as committed now, search_path
 * pinned; 0 rows when pqrun.queue_control is not there (pqrun is not
 * installed in this database). */
uint64
LoadQuery(spi::Statement &stmt, Datum *values)
{
	Oid namespace_id = get_namespace_oid("pqrun", true);
	Oid table = OidIsValid(namespace_id) ? get_relname_relid("queue_control", namespace_id) : InvalidOid;
	if (!OidIsValid(table))
		return 0;
	int nest_level = guc::PinSearchPath();
	uint64 n = spi::ExecLatest(stmt, values, nullptr, true);
	guc::Unpin(nest_level);
	return n;
}

/* FreeGone frees, lock held exclusively, the counters (and key buckets) of
 * this database's controls for which `now_of(id)` answers nothing or a
 * control that no longer counts, and the places of those that no longer
 * place; `ours(id)` says which counters to look at. */
template <typename Ours, typename NowOf>
void
FreeGone(Ours ours, NowOf now_of)
{
	for (int i = 0; i < kMaxCounters; i++) {
		if (shared->counters[i].dboid != MyDatabaseId || !ours(shared->counters[i].control_id))
			continue;
		const Control *kept = now_of(shared->counters[i].control_id);
		if (kept == nullptr || !Counted(*kept))
			FreeCounter(i);
		else if (!Placed(*kept) && shared->counters[i].placed)
			FreePlaces(i); /* a limit removed, a rate kept: counted afresh when a limit comes back */
	}
	FreeKeyBuckets([&ours, &now_of](int64 control_id) {
		if (!ours(control_id))
			return false;
		const Control *c = now_of(control_id);
		return c == nullptr || c->rate_per_key <= 0;
	});
}

/* Reload copies pqrun.queue_control as of now, and frees the counters of
 * this database's limits that are gone. */
void
Reload(uint64 gen)
{
	for (int i = 0; i < ncontrols; i++)
		FreeStrings(controls[i]);
	ncontrols = nplaced = 0;
	cache_valid = false; /* until the copy is complete */
	uint64 n = LoadQuery(stmts::kLoadControls, nullptr);
	Room(static_cast<int>(n));
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	for (uint64 r = 0; r < n; r++) {
		Control &c = controls[ncontrols++];
		FillControl(c, r);
		nplaced += Placed(c);
	}
	if (ncontrols > 1)
		qsort(controls, ncontrols, sizeof(Control), CompareControls);
	MemoryContextSwitchTo(old);
	cache_valid = true;
	cache_gen = gen;
	cache_db = MyDatabaseId;
	/* What this transaction changed may still roll back: its counters
	 * stay. */
	if (changed_here || shared == nullptr)
		return;
	/* The controls by id, so that each counter and key bucket finds its own
	 * with a binary search while the lock is held. */
	const Control **by_id = static_cast<const Control **>(palloc(sizeof(Control *) * Max(ncontrols, 1)));
	for (int j = 0; j < ncontrols; j++)
		by_id[j] = &controls[j];
	qsort(by_id, ncontrols, sizeof(Control *), CompareIds);
	auto find = [by_id](int64 id) -> const Control * {
		int lo = 0, hi = ncontrols;
		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;
			if (by_id[mid]->id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		return lo < ncontrols && by_id[lo]->id == id ? by_id[lo] : nullptr;
	};
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	FreeGone([](int64) { return true; }, find);
	LWLockRelease(shared->lock);
	pfree(by_id);
}

/* Patch reads the controls of `queue` (`len` bytes) again as of now, in
 * place of those the copy holds, and frees the counters of those of them
 * that are gone: a change of one queue's controls costs one descent of
 * queue_control_key, however many controls there are. */
void
Patch(const char *queue, int len)
{
	Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(queue, len))};
	uint64 n = LoadQuery(stmts::kLoadQueueControls, values);
	ControlRange range = RangeOf(queue, len);
	int nold = range.hi - range.lo;
	/* The controls it replaces, strings and all, until their counters are
	 * seen to. */
	Control *old_rows = static_cast<Control *>(palloc(sizeof(Control) * Max(nold, 1)));
	memcpy(old_rows, &controls[range.lo], sizeof(Control) * nold);
	cache_valid = false; /* until the copy is whole again */
	Room(ncontrols - nold + static_cast<int>(n));
	memmove(&controls[range.lo + n], &controls[range.hi], sizeof(Control) * (ncontrols - range.hi));
	ncontrols += static_cast<int>(n) - nold;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	for (uint64 r = 0; r < n; r++) {
		FillControl(controls[range.lo + r], r);
		nplaced += Placed(controls[range.lo + r]);
	}
	MemoryContextSwitchTo(old);
	for (int j = 0; j < nold; j++)
		nplaced -= Placed(old_rows[j]);
	cache_valid = true;
	if (!changed_here && shared != nullptr && nold > 0) {
		const Control *now_rows = &controls[range.lo];
		int nnow = static_cast<int>(n);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		FreeGone(
		    [old_rows, nold](int64 id) {
			    for (int j = 0; j < nold; j++)
				    if (old_rows[j].id == id)
					    return true;
			    return false;
		    },
		    [now_rows, nnow](int64 id) -> const Control * {
			    for (int j = 0; j < nnow; j++)
				    if (now_rows[j].id == id)
					    return &now_rows[j];
			    return nullptr;
		    });
		LWLockRelease(shared->lock);
	}
	for (int j = 0; j < nold; j++)
		FreeStrings(old_rows[j]);
	pfree(old_rows);
}

/* NotedHere answers whether this transaction noted `queue` as keyed, and
 * notes it when `note`. */
bool
NotedHere(Datum queue, bool note)
{
	if (noted_keyed == nullptr) {
		if (!note)
			return false;
		HASHCTL ctl{};
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(NotedQueue);
		ctl.hcxt = TopTransactionContext;
		noted_keyed = hash_create("pqrun keyed queues noted", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	text *name = DatumGetTextPP(queue);
	int len = VARSIZE_ANY_EXHDR(name);
	uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(name)), len, 0);
	bool found;
	auto *entry = static_cast<NotedQueue *>(hash_search(noted_keyed, &hash, note ? HASH_ENTER : HASH_FIND, &found));
	if (entry == nullptr)
		return false;
	if (!found)
		entry->names = NIL;
	ListCell *lc;
	foreach (lc, entry->names) {
		const text *seen = static_cast<const text *>(lfirst(lc));
		if (VARSIZE_ANY_EXHDR(seen) == static_cast<Size>(len) && memcmp(VARDATA_ANY(seen), VARDATA_ANY(name), len) == 0)
			return true;
	}
	if (note) {
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
		entry->names = lappend(entry->names, cstring_to_text_with_len(VARDATA_ANY(name), len));
		MemoryContextSwitchTo(old);
	}
	return false;
}

} // namespace

bool
SameText(Datum value, const char *s, int len)
{
	const text *t = DatumGetTextPP(value);
	return VARSIZE_ANY_EXHDR(t) == static_cast<Size>(len) && memcmp(VARDATA_ANY(t), s, len) == 0;
}

ControlRange
RangeOf(const char *queue, int len)
{
	int lo = 0, hi = ncontrols;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (CompareQueues(controls[mid].queue, controls[mid].queue_len, queue, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int end = lo;
	while (end < ncontrols && CompareQueues(controls[end].queue, controls[end].queue_len, queue, len) == 0)
		end++;
	return ControlRange{lo, end};
}

ControlRange
RangeOf(Datum queue)
{
	const text *t = DatumGetTextPP(queue);
	return RangeOf(VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

/* Counted answers whether control `c` keeps a Counter: a limit or a rate
 * (the counter of a rate limit per key names its buckets). */
bool
Counted(const Control &c)
{
	return c.max_running >= 0 || c.rate > 0 || c.max_per_key >= 0 || c.rate_per_key > 0;
}

/* Placed answers whether control `c` counts places: a limit, of the queue
 * or of each of its keys. */
bool
Placed(const Control &c)
{
	return c.max_running >= 0 || c.max_per_key >= 0;
}

/* QueueRow answers whether control `c` is a queue's own (no job type, no key). */
bool
QueueRow(const Control &c)
{
	return c.job_type == nullptr && c.key == nullptr;
}

/* EnsureCache brings this backend's copy of the controls up to date: the
 * queues whose controls the commits since the copy changed, and those this
 * transaction changed, are read again; the whole table only when the
 * database's ring of changes no longer tells which (wake.hpp). */
void
EnsureCache()
{
	bool whole = !cache_valid || cache_db != MyDatabaseId || (changed_here && own_overflow);
	wake::ChangedQueues changed;
	uint64 gen = wake::ControlsChangedSince(whole ? wake::kNoControlsGen : cache_gen, &changed);
	if (whole || gen == wake::kNoControlsGen || (gen != cache_gen && changed.count < 0)) {
		Reload(gen);
	} else {
		for (int i = 0; i < changed.count; i++)
			Patch(changed.names[i], changed.lens[i]);
		cache_gen = gen;
		if (own_read == own_seq)
			return;
		for (int i = 0; i < nown; i++)
			Patch(own_names[i], own_lens[i]);
	}
	own_read = own_seq;
	if (!changed_here) {
		/* What the last transaction changed is now read as it ended. */
		for (int i = 0; i < nown; i++)
			pfree(own_names[i]);
		nown = 0;
	}
}

} // namespace detail

using namespace detail;

void
NoteKeyed(Datum queue)
{
	if (NotedHere(queue, false))
		return;
	/* Before reading the mark, which maintenance may be clearing
	 * (keyed_queues.hpp). */
	keyed_queues::LockShared(queue);
	/* The controls as committed tell whether the queue is keyed already;
	 * under a transaction snapshot (REPEATABLE READ), as committed now, not
	 * as of the snapshot, which a clearing may have committed after. Once
	 * this transaction has changed them, the copy would be read again for
	 * every queue it notes (its own writes may still roll back): the write,
	 * which changes nothing for a keyed queue, is cheaper. */
	if (!changed_here && IsolationUsesXactSnapshot()) {
		Datum values[1] = {queue};
		if (spi::ExecLatest(stmts::kMarked, values, nullptr, true) > 0) {
			(void)NotedHere(queue, true);
			return;
		}
	} else if (!changed_here) {
		EnsureCache();
		ControlRange range = RangeOf(queue);
		for (int i = range.lo; i < range.hi; i++)
			if (controls[i].keyed && SameText(queue, controls[i].queue, controls[i].queue_len)) {
				(void)NotedHere(queue, true);
				return;
			}
	}
	Datum values[1] = {queue};
	if (spi::Exec(stmts::kNoteKeyed, values, nullptr, SPI_OK_INSERT) > 0)
		NoteChanged();
	(void)NotedHere(queue, true);
}

void
NoteChanged()
{
	changed_here = true;
	if (!trigger_fired)
		NoteQueueChanged(nullptr, 0, true);
}

void
NoteQueueChanged(const char *queue, int len, bool wakes)
{
	changed_here = true;
	own_seq++;
	wake::NoteControlsChanged(queue, len, wakes);
	if (own_overflow)
		return;
	for (int i = 0; i < nown; i++)
		if (queue != nullptr && own_lens[i] == len && memcmp(own_names[i], queue, len) == 0)
			return;
	if (queue == nullptr || nown == kMaxOwn) {
		own_overflow = true;
		return;
	}
	own_names[nown] = static_cast<char *>(MemoryContextAlloc(TopMemoryContext, len));
	memcpy(own_names[nown], queue, len);
	own_lens[nown++] = len;
}

void
NoteTriggerFired()
{
	trigger_fired = true;
}

} // namespace pqrun::flow_control
