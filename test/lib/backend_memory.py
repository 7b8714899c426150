# test/lib/backend_memory.py — what the Python-driven shell tests that
# measure a backend share (test/shell/memory.sh, resources.sh, keyed_queues.sh):
# the verdict lines and a backend's private peak memory.
#
# Imported with PYTHONPATH=test/lib. A backend's memory is read from
# /proc/<pid>/status, which needs root or the server's OS user.
import psycopg

failures = 0
failed = []  # the lines of the failed checks, repeated by summary()


def check(name, ok, detail=""):
    """Print "ok  NAME" or "FAIL NAME: DETAIL" and count the failure."""
    global failures
    line = f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}"
    print(line, flush=True)
    failures += 0 if ok else 1
    if not ok:
        failed.append(line)


def summary(test):
    """The failed checks again, last (test/run.sh shows a failed test's
    last lines), then the count."""
    for line in failed:
        print(line)
    print(f"{test}: {failures} failure(s)", flush=True)


def hwm_kb(pid):
    """Peak resident memory of process `pid` but the shared memory it has
    touched so far (kB): its private peak, since shared buffers it touched
    stay mapped (VmHWM less RssShmem)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()[0] if value.strip() else "0"
    return int(fields["VmHWM"]) - int(fields["RssShmem"])


def peak_over(warm, call):
    """MB the private peak of a fresh session grew by during `call(s)`,
    after `warm(s)` (a small call of the same kind)."""
    with psycopg.connect("", autocommit=True) as s:
        pid = s.info.backend_pid
        warm(s)
        before = hwm_kb(pid)
        call(s)
        return (hwm_kb(pid) - before) / 1024
