/* src/xact/deferred_claims.cpp — claims written only if they must be.
 *
 * Nothing outside this backend can tell a deferred claim from a written one
 * that is not yet committed: the rows are locked either way, and both are
 * gone with a rollback. Inside the backend, whatever could read the rows
 * starts a query on one of pqrun's relations (the executor hook here) or a
 * utility command (utility.cpp), or commits or prepares
 * (pickup_commit.cpp), and each of those writes the claims before it looks.
 *
 * A claim written in a subtransaction below the pickup's is undone if that
 * subtransaction rolls back, while the pickup's row locks stay: so each
 * batch remembers where it was written, goes back to unwritten with such a
 * rollback (the next reader or the commit writes it again), and is
 * forgotten once its write has reached the pickup's own level.
 */
#include "xact/deferred_claims.hpp"

#include "guc.hpp"
#include "jobs/claim_direct.hpp"
#include "jobs/job_row.hpp"
#include "pg/boundary.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "xact/pickup_commit.hpp"

namespace pqrun::deferred_claims {

namespace stmts {

#define WRITE_DEFERRED_CLAIMS                                                                                          \
	"UPDATE pqrun.job_live j"                                                                                          \
	"   SET status = 'RUNNING', delayed = false, attempts = j.attempts + 1, locked_at = $3, locked_by = $4,"           \
	"       lease_token = c.token, heartbeat_at = NULL,"                                                               \
	"       " PQRUN_SET_HOLDER(PQRUN_HELD_AS_PICKED) "updated_at = $3"                                                 \
	"  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS c(id, token)"                                  \
	" WHERE j.id = c.id AND j.id = ANY ($1) AND j.status = 'READY'"
static_assert(job_row::ClaimSets(WRITE_DEFERRED_CLAIMS, " FROM"), "a written claim must set what job_row says");

/* Writes deferred claims: jobs $1 with lease tokens $2 (same order),
 * claimed at $3 by worker $4, held by this session when $5. The ANY keeps
 * the generic plan on the primary key whatever it thinks of the join. */
spi::Statement kWriteDeferredClaims{"write deferred claims",
                                    WRITE_DEFERRED_CLAIMS,
                                    5,
                                    {INT8ARRAYOID, UUIDARRAYOID, TIMESTAMPTZOID, TEXTOID, BOOLOID}};

} // namespace stmts

namespace {

/* The claims of one pickup, in TopTransactionContext. */
struct Batch {
	Claims claims;
	TimestampTz at;
	char *worker;
	Oid owner;                   /* the role the pickup ran as (the extension's owner) */
	Oid namespace_id;            /* pqrun's schema */
	SubTransactionId subid;      /* where the pickup's row locks are */
	SubTransactionId written_in; /* where the claims were written; invalid while they are not */
	Batch *next;
};

/* Batches of this transaction whose claims are unwritten, or written below
 * the pickup's subtransaction. */
Batch *batches = nullptr;

bool
Unwritten()
{
	for (const Batch *b = batches; b != nullptr; b = b->next)
		if (b->written_in == InvalidSubTransactionId)
			return true;
	return false;
}

/* Settle forgets the batches whose claims were written at the pickup's own
 * level: they now stand or fall with its row locks. */
void
Settle()
{
	for (Batch **link = &batches; *link != nullptr;) {
		if ((*link)->written_in == (*link)->subid)
			*link = (*link)->next;
		else
			link = &(*link)->next;
	}
}

/* The one batch a pickup of this subtransaction left unwritten, if any. */
Batch *
Finishable()
{
	Batch *b = batches;
	if (b == nullptr || b->written_in != InvalidSubTransactionId || b->subid != GetCurrentSubTransactionId())
		return nullptr;
	return b;
}

Datum
UuidArray(const pg_uuid_t *tokens, int n)
{
	Datum *elems = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	for (int i = 0; i < n; i++)
		elems[i] = UUIDPGetDatum(const_cast<pg_uuid_t *>(&tokens[i]));
	return PointerGetDatum(construct_array(elems, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
}

/* WriteBySql runs the claim UPDATE for `d` as the role that made the claims
 * (the current user may not write pqrun's tables), restricted as
 * maintenance commands run table owners' code. */
void
WriteBySql(const Batch *d)
{
	Oid user;
	int sec_context;
	GetUserIdAndSecContext(&user, &sec_context);
	SetUserIdAndSecContext(d->owner, sec_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	/* The caller's search_path, not the pickup's pinned one, is in force. */
	int nest_level = guc::PinSearchPath();
	spi::Connect();
	const Claims &c = d->claims;
	Datum values[5] = {spi::Int8Array(c.ids, c.count), UuidArray(c.tokens, c.count), TimestampTzGetDatum(d->at),
	                   CStringGetTextDatum(d->worker), BoolGetDatum(c.by_session)};
	uint64 written = spi::Exec(stmts::kWriteDeferredClaims, values, nullptr, SPI_OK_UPDATE);
	/* Each claimed row is locked by this transaction: only an operator's
	 * trigger or rule can keep the claim from being written. */
	if (written != static_cast<uint64>(c.count))
		ereport(ERROR, (errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
		                errmsg("a trigger or rule on pqrun.job_live suppressed %llu of %d claims",
		                       static_cast<unsigned long long>(c.count - written), c.count),
		                errdetail("The jobs stay READY.")));
	spi::Finish();
	guc::Unpin(nest_level);
	SetUserIdAndSecContext(user, sec_context);
}

/* Write writes the claims of `d`, below the executor when it can. */
void
Write(const Batch *d)
{
	bool claims_only = pickup_commit::ClaimsOnlySoFar();
	/* At commit there is no statement, and so no snapshot, to run under. */
	bool own_snapshot = !ActiveSnapshotSet();
	if (own_snapshot)
		PushActiveSnapshot(GetTransactionSnapshot());
	if (!claim_direct::Write(d->claims, d->at, d->worker, d->namespace_id))
		WriteBySql(d);
	if (own_snapshot)
		PopActiveSnapshot();
	/* Writing claims is claiming: a transaction that did nothing else still
	 * commits as a claim-only one. */
	pickup_commit::AfterPickup(claims_only);
}

/* ReadsQueue answers whether the query of `query_desc` reads or writes a
 * relation of pqrun's schema (views are expanded into their tables by
 * then). Queries that do not cannot see the jobs, nor can anything they
 * call without starting a query of its own. */
bool
ReadsQueue(const QueryDesc *query_desc, Oid namespace_id)
{
	ListCell *lc;
	foreach (lc, query_desc->plannedstmt->rtable) {
		const auto *rte = lfirst_node(RangeTblEntry, lc);
		if (rte->rtekind == RTE_RELATION && get_rel_namespace(rte->relid) == namespace_id)
			return true;
	}
	return false;
}

} // namespace

/* WriteBeforeLooking writes the deferred claims before a query that looks at
 * the queue starts, and lets it see them when its snapshot is its own
 * (taken for it alone, as for every top-level statement and every statement
 * of a volatile function); a snapshot shared with an enclosing query did not
 * see the pickup's writes either. */
void
WriteBeforeLooking(QueryDesc *query_desc)
{
	if (!Unwritten() || IsInParallelMode() || !ReadsQueue(query_desc, batches->namespace_id))
		return;
	WriteAll();
	Snapshot snapshot = query_desc->snapshot;
	if (snapshot != nullptr && snapshot->copied && snapshot->regd_count == 1 && snapshot->active_count <= 1)
		snapshot->curcid = GetCurrentCommandId(false);
}

/* A subtransaction's claims move to its parent when it commits; its
 * unwritten ones go with it when it rolls back (the row locks went too),
 * and those it wrote become unwritten again. */
void
AtSubCommit(SubTransactionId subid, SubTransactionId parent_subid)
{
	for (Batch *b = batches; b != nullptr; b = b->next) {
		if (b->subid == subid)
			b->subid = parent_subid;
		if (b->written_in == subid)
			b->written_in = parent_subid;
	}
	Settle();
}

void
AtSubAbort(SubTransactionId subid)
{
	for (Batch **link = &batches; *link != nullptr;) {
		Batch *b = *link;
		if (b->subid == subid) {
			*link = b->next;
			continue;
		}
		if (b->written_in == subid)
			b->written_in = InvalidSubTransactionId;
		link = &b->next;
	}
	Settle();
}

bool
ShouldDefer()
{
	return pqrun_deferred_claims;
}

void
Defer(const Claims &claims, TimestampTz at, const char *worker)
{
	Assert(!Unwritten());
	if (claims.count == 0)
		return;
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	auto *b = static_cast<Batch *>(palloc(sizeof(Batch)));
	int n = claims.count;
	b->claims = {n, static_cast<int64 *>(palloc(sizeof(int64) * n)),
	             static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t) * n)), static_cast<bool *>(palloc(sizeof(bool) * n)),
	             static_cast<ItemPointerData *>(palloc(sizeof(ItemPointerData) * n)),
	             /* The hold is decided when the claim is made, whatever the
	              * setting is by the time it is written. */
	             pqrun_claim_hold == PQRUN_HOLD_SESSION};
	memcpy(b->claims.ids, claims.ids, sizeof(int64) * n);
	memcpy(b->claims.tokens, claims.tokens, sizeof(pg_uuid_t) * n);
	memcpy(b->claims.in_fifo, claims.in_fifo, sizeof(bool) * n);
	memcpy(b->claims.ctids, claims.ctids, sizeof(ItemPointerData) * n);
	b->at = at;
	b->worker = pstrdup(worker);
	b->owner = GetUserId();
	b->namespace_id = get_namespace_oid("pqrun", false);
	b->subid = GetCurrentSubTransactionId();
	b->written_in = InvalidSubTransactionId;
	b->next = batches;
	MemoryContextSwitchTo(old);
	batches = b;
}

void
WriteAll()
{
	/* All marked written first, so that the UPDATEs' own executor starts
	 * find nothing to write; if one fails, the rollback of this
	 * subtransaction marks them unwritten again. */
	SubTransactionId here = GetCurrentSubTransactionId();
	List *to_write = NIL;
	for (Batch *b = batches; b != nullptr; b = b->next) {
		if (b->written_in == InvalidSubTransactionId) {
			b->written_in = here;
			to_write = lappend(to_write, b);
		}
	}
	if (to_write == NIL)
		return;
	ListCell *lc;
	foreach (lc, to_write)
		Write(static_cast<const Batch *>(lfirst(lc)));
	list_free(to_write);
	Settle();
}

void
Forget()
{
	batches = nullptr; /* their memory goes with the transaction */
}

Oid
FinishableIn()
{
	Batch *b = Finishable();
	return b ? b->namespace_id : InvalidOid;
}

Taken
TakeForFinish(int n, const Datum *ids, const Datum *leases)
{
	Taken taken{{0, nullptr, nullptr, nullptr, nullptr}, 0, Datum(0)};
	Batch *b = Finishable();
	if (b == nullptr)
		return taken;
	Claims *d = &b->claims;
	Claims *t = &taken.claims;
	t->ids = static_cast<int64 *>(palloc(sizeof(int64) * (d->count + 1)));
	t->tokens = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t) * (d->count + 1)));
	t->ctids = static_cast<ItemPointerData *>(palloc(sizeof(ItemPointerData) * (d->count + 1)));
	/* Claims come in pickup order, the ids in the caller's: match through a
	 * hash of the claims' positions. */
	struct Entry {
		int64 id;
		int pos;
	};
	HASHCTL ctl{};
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(Entry);
	ctl.hcxt = CurrentMemoryContext;
	HTAB *positions = hash_create("pqrun deferred claims", d->count, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int i = 0; i < d->count; i++) {
		bool found;
		static_cast<Entry *>(hash_search(positions, &d->ids[i], HASH_ENTER, &found))->pos = i;
	}
	bool *take = static_cast<bool *>(palloc0(sizeof(bool) * (d->count + 1)));
	for (int i = 0; i < n; i++) {
		int64 id = DatumGetInt64(ids[i]);
		auto *entry = static_cast<Entry *>(hash_search(positions, &id, HASH_FIND, nullptr));
		if (entry == nullptr || d->in_fifo[entry->pos])
			continue;
		if (leases && memcmp(DatumGetUUIDP(leases[i]), &d->tokens[entry->pos], UUID_LEN) != 0)
			continue; /* written first, it is refused as a stale lease */
		take[entry->pos] = true;
	}
	/* What stays deferred is compacted in place. */
	int kept = 0;
	for (int i = 0; i < d->count; i++) {
		if (take[i]) {
			t->ids[t->count] = d->ids[i];
			t->ctids[t->count] = d->ctids[i];
			t->tokens[t->count++] = d->tokens[i];
		} else {
			d->ids[kept] = d->ids[i];
			d->tokens[kept] = d->tokens[i];
			d->ctids[kept] = d->ctids[i];
			d->in_fifo[kept++] = d->in_fifo[i];
		}
	}
	d->count = kept;
	if (kept == 0)
		batches = b->next;
	hash_destroy(positions);
	taken.at = b->at;
	taken.worker = CStringGetTextDatum(b->worker);
	return taken;
}

} // namespace pqrun::deferred_claims
