# test/lib/regress.sh — the pg_regress and isolation suites of a checkout,
# against the running cluster in PGHOST/PGPORT.
#
# Sourced by test/run.sh and test/shell/newcomer.sh (after cluster.sh). Both
# tools run as the cluster's OS user, which may not be able to read the
# checkout (a clone in root's home, or in a mktemp directory, is mode 700), so
# they read copies of their inputs made in WORK, which that user owns, and
# start there.

# copy_inputs REPO DEST PATH...: copy REPO's PATHs into DEST, owned by the
# cluster's OS user when we are root.
copy_inputs() {
	local repo=$1 dest=$2
	shift 2
	mkdir -p "$dest"
	(cd "$repo" && cp -r "$@" "$dest/")
	[ "$(id -u)" = 0 ] && chown -R postgres: "$dest"
	return 0
}

# run_pg_regress REPO WORK DBNAME [TESTS]: REPO's REGRESS tests (sql/,
# expected/), or those of TESTS, results in WORK/regress; prints
# pg_regress's report, exits with its status.
run_pg_regress() {
	local repo=$1 work=$2 db=$3 tests=${4:-$(sed -n 's/^REGRESS *= *//p' "$1/Makefile")} pgxs
	pgxs=$(dirname "$(pg_config --pgxs)")/../..
	copy_inputs "$repo" "$work/regress-input" sql expected
	mkdir -p "$work/regress" && { [ "$(id -u)" = 0 ] && chown postgres: "$work/regress"; }
	(cd "$work" && as_pg "$pgxs/src/test/regress/pg_regress" --inputdir="$work/regress-input" --outputdir="$work/regress" \
		--bindir="$PG_BINDIR" --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname="$db" $tests 2>&1)
}

# run_isolation REPO WORK DBNAME [SPECS]: REPO's ISOLATION specs
# (test/isolation), or those of SPECS, results in WORK/isolation; prints the
# report, exits with its status.
run_isolation() {
	local repo=$1 work=$2 db=$3 specs=${4:-$(sed -n 's/^ISOLATION *= *//p' "$1/Makefile")} pgxs
	pgxs=$(dirname "$(pg_config --pgxs)")/../..
	copy_inputs "$repo/test/isolation" "$work/isolation-input" specs expected
	mkdir -p "$work/isolation" && { [ "$(id -u)" = 0 ] && chown postgres: "$work/isolation"; }
	(cd "$work" && as_pg "$pgxs/src/test/isolation/pg_isolation_regress" --inputdir="$work/isolation-input" \
		--outputdir="$work/isolation" --bindir="$PG_BINDIR" --host="$PGHOST" --port="$PGPORT" --user=postgres \
		--dbname="$db" $specs 2>&1)
}
