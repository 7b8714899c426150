#!/usr/bin/env bash
# test/packages/python_client.sh — the Python client (clients/python) as a
# user gets it: its wheel is built offline with Debian's python3-build and
# setuptools (`python3 -m build --wheel --no-isolation`, from a copy of the
# source), checked (version 0.20.0, Requires-Dist psycopg>=3.1, py.typed, the
# pqrun-worker script), installed with pip --no-index into a fresh virtual
# environment that sees Debian's psycopg (--system-site-packages), and its
# pytest suite (clients/python/tests: producer calls in the caller's
# transaction, batches, dedupe, delays, dependencies, FIFO groups,
# concurrency keys, SQLSTATEs as exceptions; the thread and asyncio workers:
# registry, slots, long poll, finish-and-claim, claims in batches of free
# slots, heartbeats with progress, cancel reaching the handler, snooze,
# release at shutdown, retryable and terminal errors, typed args) runs with
# that environment's python against the stage's cluster (PGHOST, PGPORT,
# PGUSER), from a copy of the tests outside the source tree: the suite
# fails unless `pqrun` is imported from the environment's site-packages.
#
# Installs python3-psycopg, python3-build, python3-pytest, python3-venv,
# python3-setuptools and python3-wheel when missing. Budget: 2 minutes
# (about 30 s once the packages are there; the tests take about 22 s).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?}" "${PGUSER:?}"

source "$repo/test/lib/need_packages.sh"
need_packages python3-psycopg python3-build python3-pytest python3-venv python3-setuptools python3-wheel ||
	{ echo "cannot install the Debian packages the Python client's build and tests need"; exit 77; }
py=/usr/bin/python3 # Debian's, where those packages are

work=$(mktemp -d "${PQRUN_WORK:-/tmp}/python_client.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

echo "-- build the wheel (offline, from a copy of clients/python)"
cp -r "$repo/clients/python" "$work/source"
rm -rf "$work/source/build" "$work/source/dist" "$work/source/src/"*.egg-info
if ! timeout 60 "$py" -m build --wheel --no-isolation --outdir "$work/dist" "$work/source" >"$work/build.log" 2>&1; then
	tail -n 30 "$work/build.log"
	echo "FAIL: the wheel did not build"
	exit 1
fi
wheel=$work/dist/pqrun-0.20.0-py3-none-any.whl
[ -f "$wheel" ] && echo "ok: built $(basename "$wheel")" || { ls "$work/dist"; echo "FAIL: no pqrun 0.20.0 wheel"; exit 1; }

echo "-- its metadata and files"
"$py" - "$wheel" <<'EOF' || fail "the wheel's metadata or files"
import sys, zipfile
from email.parser import Parser
from packaging.requirements import Requirement

wheel = zipfile.ZipFile(sys.argv[1])
names = wheel.namelist()
meta = Parser().parsestr(wheel.read("pqrun-0.20.0.dist-info/METADATA").decode())
requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
checks = {
    "Name: pqrun, Version: 0.20.0": (meta["Name"], meta["Version"]) == ("pqrun", "0.20.0"),
    "Requires-Dist: psycopg>=3.1, and nothing else": [(r.name, str(r.specifier)) for r in requires] == [("psycopg", ">=3.1")],
    "typed: pqrun/py.typed": "pqrun/py.typed" in names,
    "the package README as its description": "pqrun-worker" in (meta.get_payload() or ""),
    "the console script pqrun-worker": "pqrun-worker = pqrun.cli:main"
        in wheel.read("pqrun-0.20.0.dist-info/entry_points.txt").decode(),
    "no tests or build files in it": not [n for n in names if n.startswith(("tests/", "build/"))],
}
for what, ok in checks.items():
    print(("ok: " if ok else "FAIL: ") + what)
sys.exit(0 if all(checks.values()) else 1)
EOF

echo "-- install it into a fresh virtual environment (pip, no index)"
venv=$work/venv
if ! "$py" -m venv --system-site-packages "$venv" >"$work/venv.log" 2>&1 ||
	! "$venv/bin/python" -m pip install --no-index --no-cache-dir "$wheel" >>"$work/venv.log" 2>&1; then
	tail -n 20 "$work/venv.log"
	echo "FAIL: the wheel did not install"
	exit 1
fi
where=$(cd "$work" && "$venv/bin/python" -c 'import pqrun, psycopg; print(pqrun.__version__, pqrun.__file__, psycopg.__version__)')
case "$where" in
"0.20.0 $venv/lib/python3"*/site-packages/pqrun/__init__.py*) echo "ok: pqrun $where" ;;
*) fail "pqrun imported as [$where], not from the environment" ;;
esac
"$venv/bin/pqrun-worker" --help >/dev/null && echo "ok: pqrun-worker --help" || fail "pqrun-worker --help"
(cd "$work" && "$py" -c 'import pqrun' 2>/dev/null) && fail "pqrun is importable outside the environment"

echo "-- the client's tests, with the installed package, against the cluster"
cp -r "$repo/clients/python/tests" "$work/tests"
cd "$work/tests" || exit 1
start=$SECONDS
PQRUN_EXPECT_INSTALLED=$venv timeout 100 "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE "$work/tests" 2>&1 |
	tail -n 40
rc=${PIPESTATUS[0]}
cd - >/dev/null
[ "$rc" = 0 ] && echo "ok: pytest passed in $((SECONDS - start)) s" || fail "pytest exited with $rc after $((SECONDS - start)) s"

if [ $failures != 0 ]; then
	echo "python_client: $failures check(s) failed"
	exit 1
fi
echo "python_client: all checks passed"
