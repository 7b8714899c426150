#!/usr/bin/env bash
# test/run.sh — runs every pqrun test suite against a throwaway cluster.
#
# Builds and installs the extension, starts a private PostgreSQL with pqrun
# preloaded, then runs: the unit tests of the pure C++ modules, pg_regress
# (sql/ + expected/), the isolation specs (test/isolation), pgTAP
# (test/pgtap) and the shell-driven tests (test/shell/*.sh, which may start
# clusters of their own). Ends with one line "N passed, M failed".
#
# Usage: bash test/run.sh [--keep]   (--keep leaves the cluster's files)
#
# With PG_MAJORS="15 17 18", the whole suite runs once per PostgreSQL major
# version: the machine's own version here, the others each in its Debian
# root (test/lib/pg_root.sh); one "N passed, M failed" line over all.
#
# With PQRUN_PACKAGES=1 (as .ci/run sets it), the run on the machine's own
# version then also runs test/packages/*.sh: the Debian and PGXN packages,
# the client libraries and the dashboard, each built and installed as a
# user would (they make Debian roots of their own for other versions).
#
# A suite that cannot run here is skipped: it counts neither way, and the
# line before the last says how many were, each named above it
# ("SKIPPED: ..."). With PQRUN_ALLOWED_SKIPS (words MAJOR:SUITE, as .ci/run
# sets it), a skip it does not name counts as a failure.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

keep=0
[ "${1:-}" = "--keep" ] && keep=1

passed=0
failed=0
failures=()
skips=() # "MAJOR:SUITE why"
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); failures+=("$1"); }
skip() { skips+=("$1"); }

# finish: the skips, the summary line, and the exit status.
finish() {
	local s
	for s in "${skips[@]}"; do
		if [ -n "${PQRUN_ALLOWED_SKIPS:-}" ] && ! grep -qw -- "${s%% *}" <<<"$PQRUN_ALLOWED_SKIPS"; then
			fail "unexpected skip of ${s%% *}: ${s#* }"
		fi
	done
	echo
	for s in "${skips[@]}"; do echo "SKIPPED: $s"; done
	for f in "${failures[@]}"; do echo "FAILED: $f"; done
	echo "${#skips[@]} skipped"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

if [ -n "${PG_MAJORS:-}" ]; then
	source test/lib/pg_root.sh
	host_major=$(pg_root_host_major)
	for major in $PG_MAJORS; do
		echo "=== PostgreSQL $major"
		log=$(mktemp /tmp/pqrun-matrix.XXXXXX)
		if [ "$major" = "$host_major" ]; then
			PG_MAJORS= PQRUN_ALLOWED_SKIPS= bash test/run.sh "$@" 2>&1 | tee "$log"
		else
			pg_root_run "$major" "$repo" "bash test/run.sh $*" 2>&1 | tee "$log"
			for d in regression isolation; do
				[ -f "$PQRUN_PG_ROOTS/$major/src/pqrun/$d.diffs" ] &&
					cp "$PQRUN_PG_ROOTS/$major/src/pqrun/$d.diffs" "$repo/$d.pg$major.diffs"
			done
		fi
		summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
		if [ -n "$summary" ]; then
			passed=$((passed + ${summary%% passed*}))
			n=${summary#*, }
			failed=$((failed + ${n%% failed}))
			while IFS= read -r f; do failures+=("PostgreSQL $major: $f"); done < <(sed -n 's/^FAILED: //p' "$log")
			while IFS= read -r f; do skips+=("$f"); done < <(sed -n 's/^SKIPPED: //p' "$log")
		else
			fail "PostgreSQL $major: the suite did not run to its end"
		fi
		rm -f "$log"
	done
	finish
fi

rm -f regression.diffs isolation.diffs
bash test/lib/install_deps.sh || { echo "0 passed, 1 failed"; exit 1; }
source test/lib/cluster.sh

echo "== build and install"
make -s -j2 ERROR_ON_WARNING=1 >/dev/null && make -s install >/dev/null || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

work=$(mktemp -d /tmp/pqrun-test.XXXXXX)
chmod 755 "$work"
[ "$(id -u)" = 0 ] && chown postgres: "$work"
port=${PQRUN_TEST_PORT:-54329}
cleanup() {
	cluster_stop "$work"
	[ $keep = 1 ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

cluster_init "$work" "$port" test/pqrun.conf && cluster_start "$work" || { echo "0 passed, 1 failed"; exit 1; }
export PGHOST=$work PGPORT=$port PGUSER=postgres
# The tests start psql, createdb and pg_dump thousands of times: the
# server's own binaries, not Debian's wrapper of them (a Perl script that
# costs a call about 35 ms of CPU to choose the version).
export PATH=$PG_BINDIR:$PATH

# count_pg_regress SUITE LOGFILE STATUS NAMES: add pg_regress's per-test
# verdicts to the tally ("test name ... ok" up to PostgreSQL 15, TAP's "ok 1 -
# name" from 16); a failing run that reported no failed test counts as one,
# and so does a run that reported fewer verdicts than NAMES has tests.
count_pg_regress() {
	local line name before=$failed verdicts=$((passed + failed))
	while IFS= read -r line; do
		if [[ "$line" =~ ^(not\ )?ok\ [0-9]+\ +[-+]\ +([^ ]+) ]]; then
			if [ -z "${BASH_REMATCH[1]}" ]; then pass; else fail "$1: ${BASH_REMATCH[2]}"; fi
			continue
		fi
		name=$(sed -E 's/^(test|permutation)? *([^ ]+).*/\2/; s/^ +//' <<<"$line")
		case "$line" in
		*" ... ok"* | *" ... ignored"*) pass ;;
		*" ... FAILED"* | *" ... failed"*) fail "$1: $name" ;;
		esac
	done <"$2"
	[ "$3" != 0 ] && [ "$failed" = "$before" ] && fail "$1: pg_regress exited with $3"
	verdicts=$((passed + failed - verdicts))
	[ "$verdicts" -lt "$(wc -w <<<"$4")" ] && fail "$1: $verdicts verdicts for the $(wc -w <<<"$4") tests it lists"
	return 0
}

echo "== unit tests"
# Each unit test program's own checks count: "NAME: N passed, M failed".
make -s -C test/unit >"$work/unit.log" 2>&1
unit_status=$?
unit_before=$((passed + failed)) unit_failed=$failed
while IFS= read -r line; do
	if [[ "$line" =~ ^([a-z_]+):\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		echo "$line"
		passed=$((passed + BASH_REMATCH[2]))
		for _ in $(seq "${BASH_REMATCH[3]}"); do fail "unit: ${BASH_REMATCH[1]}"; done
	fi
done <"$work/unit.log"
if { [ "$unit_status" != 0 ] && [ "$failed" = "$unit_failed" ]; } || [ $((passed + failed)) = "$unit_before" ]; then
	fail "unit: make -C test/unit exited with $unit_status"
	tail -n 20 "$work/unit.log"
fi

# pg_regress and pg_isolation_regress run as the cluster's OS user, which
# may not read this checkout (a clone in root's home is mode 700): they get
# copies of their inputs in the run's own directory.
echo "== pg_regress"
source test/lib/regress.sh
run_pg_regress "$repo" "$work" pqrun_regress | tee "$work/regress.log"
count_pg_regress regress "$work/regress.log" "${PIPESTATUS[0]}" "$(sed -n 's/^REGRESS *= *//p' Makefile)"
# The differences go to the output as well: CI shows nothing else.
[ -f "$work/regress/regression.diffs" ] && cp "$work/regress/regression.diffs" "$repo/regression.diffs" &&
	head -n 100 "$work/regress/regression.diffs"

echo "== isolation"
run_isolation "$repo" "$work" pqrun_isolation | tee "$work/isolation.log"
count_pg_regress isolation "$work/isolation.log" "${PIPESTATUS[0]}" "$(sed -n 's/^ISOLATION *= *//p' Makefile)"
[ -f "$work/isolation/regression.diffs" ] && cp "$work/isolation/regression.diffs" "$repo/isolation.diffs" &&
	head -n 100 "$work/isolation/regression.diffs"

echo "== pgTAP"
createdb pqrun_tap && psql -qX -d pqrun_tap -c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION pqrun" >/dev/null
for f in test/pgtap/*.sql; do
	[ -e "$f" ] || continue
	if PGDATABASE=pqrun_tap pg_prove "$f" >"$work/tap.log" 2>&1; then
		pass
		echo "pgtap $f ... ok"
	else
		fail "pgtap: $f"
		cat "$work/tap.log"
	fi
done

echo "== shell tests"
# shell_verdict TEST STATUS LOG SECONDS: count a shell test's exit status. A
# test that cannot run here (exit status 77, as in automake) says why on its
# last line; it counts neither way.
shell_verdict() {
	if [ "$2" = 0 ]; then
		pass
		echo "shell $1 ... ok ($4 s)"
	elif [ "$2" = 77 ]; then
		echo "shell $1 ... skipped: $(tail -n 1 "$3")"
		skip "$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'):$(basename "$1") $(tail -n 1 "$3")"
	else
		# The summary names the first failed check too: a run's output may
		# reach its reader only in part, its end always.
		local why
		why=$(grep -m 1 -E '^(FAIL|not ok|die:)' "$3" | cut -c 1-160)
		fail "shell: $1${why:+ ($why)}"
		echo "shell $1 ... FAILED"
		# What failed with the indented lines that explain it (up to 5 just
		# before it, as a wait that timed out prints its last answer, and
		# those after it), then how the log ends (a worker's own log lines
		# can fill the end of it).
		awk '/^(FAIL|not ok|die:)/ { for (i = (n > 5 ? n - 5 : 0); i < n; i++) print before[i]; n = 0; show = 1; print; next }
		     show && /^[ \t]/ { print; next }
		     /^[ \t]/ { before[n++] = $0; next }
		     { show = 0; n = 0 }' "$3" |
			head -n 80
		tail -n 40 "$3"
	fi
}
# How each test shares the server, by a line of its own:
#  - "# test/run.sh: alone": it changes the server's settings (ALTER
#    SYSTEM, which every database's worker reads), installs the library,
#    counts what the whole server does (MultiXacts), or bounds wake-ups and
#    waits in fractions of a second. It runs after every other test has
#    ended, with nothing beside it.
#  - "# test/run.sh: beside the others": it mostly waits for the clock
#    (pg_cron's minute, the workers' rounds, a worker's jobs) or measures
#    memory and buffers but not time, in a database or cluster of its own.
#    Three lanes run these one after another, each taking the next one not
#    yet taken, while the tests without a line run one at a time.
# The verdicts of the lanes come after those of the tests without a line,
# the alone tests' last.
shell_kind() {
	sed -n 's/^# test\/run.sh: \(alone\|beside the others\)$/\1/p' "$1" | head -n 1
}
beside=() alone=() plain=()
for t in test/shell/*.sh; do
	[ -e "$t" ] || continue
	case "$(shell_kind "$t")" in
	alone) alone+=("$t") ;;
	"beside the others") beside+=("$t") ;;
	*) plain+=("$t") ;;
	esac
done
# shell_lane: runs the beside tests no other lane has taken yet.
shell_lane() {
	local t name start
	for t in "${beside[@]}"; do
		name=$(basename "$t")
		mkdir "$work/taken.$name" 2>/dev/null || continue
		start=$SECONDS
		PQRUN_WORK=$work bash "$t" >"$work/$name.log" 2>&1
		echo $? >"$work/$name.status"
		echo $((SECONDS - start)) >"$work/$name.seconds"
	done
}
lanes=()
for _ in 1 2 3; do
	shell_lane &
	lanes+=($!)
done
# shell_run TEST: runs it now and counts its verdict.
shell_run() {
	local start=$SECONDS
	PQRUN_WORK=$work bash "$1" >"$work/shell.log" 2>&1
	shell_verdict "$1" $? "$work/shell.log" $((SECONDS - start))
}
for t in "${plain[@]}"; do shell_run "$t"; done
wait "${lanes[@]}"
for t in "${beside[@]}"; do
	name=$(basename "$t")
	shell_verdict "$t" "$(cat "$work/$name.status" 2>/dev/null || echo 1)" "$work/$name.log" \
		"$(cat "$work/$name.seconds" 2>/dev/null)"
done
for t in "${alone[@]}"; do shell_run "$t"; done

if [ "${PQRUN_PACKAGES:-}" = 1 ]; then
	echo "== packages, clients and dashboard"
	for t in test/packages/*.sh; do
		[ -e "$t" ] || continue
		start=$SECONDS
		PQRUN_WORK=$work bash "$t" >"$work/package.log" 2>&1
		shell_verdict "$t" $? "$work/package.log" $((SECONDS - start))
	done
fi

if [ "$failed" != 0 ]; then
	echo
	echo "== server log: crashes and errors"
	grep -E "PANIC|TRAP|terminated by signal|server process .* was terminated" "$work/server.log" | tail -n 20
	refused=$(grep -c "too many clients" "$work/server.log")
	[ "$refused" = 0 ] || echo "$refused connections refused: too many clients"
	# A deadlock's report names both processes, their statements and locks.
	grep -A 6 "deadlock detected" "$work/server.log" | head -n 60
fi
finish
