/* src/xact/next_due.cpp — the earliest due time of delayed jobs
 * (next_due.hpp). */
#include "xact/next_due.hpp"

#include "shmem/shmem.hpp"
#include "xact/wake.hpp"

namespace pqrun::next_due {

namespace {

/* The earliest run_after of a delayed job this transaction made, 0: none. */
TimestampTz earliest_delayed = 0;

} // namespace

void
NoteDelayed(TimestampTz run_after)
{
	if (earliest_delayed == 0 || run_after < earliest_delayed)
		earliest_delayed = run_after;
}

TimestampTz
Read()
{
	TimestampTz due = 0;
	(void)shmem::ReadMySlot([&due](const shmem::DatabaseSlot &slot) { due = slot.wake.next_due; });
	return due;
}

void
Replace(TimestampTz seen, TimestampTz due)
{
	shmem::UpdateMySlot([seen, due](shmem::DatabaseSlot &slot) {
		if (slot.wake.next_due == seen)
			slot.wake.next_due = due;
	});
}

bool
MayBeDue()
{
	TimestampTz due = Read();
	return due == 0 || due <= GetCurrentTimestamp();
}

void
AtCommit()
{
	if (earliest_delayed == 0)
		return;
	/* Unknown stays unknown: older delayed jobs may exist (next_due.hpp). */
	shmem::UpdateMySlot([](shmem::DatabaseSlot &slot) {
		if (slot.wake.next_due != 0 && earliest_delayed < slot.wake.next_due)
			slot.wake.next_due = earliest_delayed;
	});
	/* A waiter may be sleeping past the new due time: let one re-time. */
	wake::WakeAll();
	Forget();
}

void
Forget()
{
	earliest_delayed = 0;
}

} // namespace pqrun::next_due
