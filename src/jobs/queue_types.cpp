/* src/jobs/queue_types.cpp — the job types of a queue, as a pickup last
 * found them. */
#include "jobs/queue_types.hpp"

#include "xact/wake.hpp"

namespace pqrun::queue_types {

namespace {

/* One queue's job types: `queue` and then the types, each a text datum,
 * in one block of TopMemoryContext. */
struct Entry {
	char *block; /* nullptr: unused */
	int ntypes;
	uint64 gen;
};
constexpr int kEntries = 16;
constexpr Size kMaxBlock = 8192; /* a queue whose names take more is looked up each time */
Entry entries[kEntries];
int next_victim = 0;

/* Texts answers the `n` text datums packed in `block`, each padded to an
 * int4 boundary: the queue's name, then its job types. */
template <typename Visit>
void
Texts(const char *block, int n, Visit visit)
{
	for (int i = 0; i < n; i++) {
		visit(i, PointerGetDatum(block));
		block += INTALIGN(VARSIZE(block));
	}
}

bool
Holds(const Entry &e, const text *queue)
{
	return e.block != nullptr && VARSIZE(e.block) == VARSIZE(queue) &&
	       memcmp(e.block, queue, VARSIZE(queue)) == 0;
}

} // namespace

bool
Known(Datum queue, Datum **types, int *ntypes)
{
	const text *flat = DatumGetTextP(queue);
	for (Entry &e : entries) {
		if (!Holds(e, flat))
			continue;
		if (!pick_hint::NothingReadyBelow(pick_hint::PickKey{INT64_MAX, INT64_MAX}, e.gen))
			return false;
		*types = static_cast<Datum *>(palloc(sizeof(Datum) * (e.ntypes + 1)));
		*ntypes = e.ntypes;
		Texts(e.block, e.ntypes + 1, [&](int i, Datum value) {
			if (i > 0)
				(*types)[i - 1] = PointerGetDatum(PG_DETOAST_DATUM_COPY(value));
		});
		return true;
	}
	return false;
}

void
Remember(Datum queue, const Datum *types, int ntypes, uint64 gen)
{
	text *flat_queue = DatumGetTextP(queue);
	Size size = INTALIGN(VARSIZE(flat_queue));
	for (int i = 0; i < ntypes && size <= kMaxBlock; i++)
		size += INTALIGN(VARSIZE_ANY(DatumGetPointer(types[i])));
	Entry *e = nullptr;
	for (Entry &held : entries)
		if (Holds(held, flat_queue))
			e = &held;
	if (e == nullptr) {
		e = &entries[next_victim];
		next_victim = (next_victim + 1) % kEntries;
	}
	if (e->block != nullptr)
		pfree(e->block);
	e->block = nullptr;
	if (size > kMaxBlock)
		return;
	char *block = static_cast<char *>(MemoryContextAllocZero(TopMemoryContext, size));
	char *at = block;
	memcpy(at, flat_queue, VARSIZE(flat_queue));
	at += INTALIGN(VARSIZE(flat_queue));
	for (int i = 0; i < ntypes; i++) {
		text *type = DatumGetTextP(types[i]);
		memcpy(at, type, VARSIZE(type));
		at += INTALIGN(VARSIZE(type));
	}
	*e = Entry{block, ntypes, gen};
}

} // namespace pqrun::queue_types
