# test/lib/amcheck.sh — amcheck_ok, for the tests that crash, kill or
# drain: PostgreSQL's own check of pqrun's storage (test/lib/amcheck.sql).

# amcheck_ok NAME PSQL_ARGS...: amcheck finds nothing wrong in pqrun's tables
# and indexes of the database the psql arguments reach; prints one line and
# returns 1 when it does.
amcheck_ok() {
	local name=$1 got
	shift
	got=$(psql -X -qtA "$@" -f "$(dirname "${BASH_SOURCE[0]}")/amcheck.sql" 2>&1)
	if [[ "$got" == ok:* ]]; then
		echo "ok   $name: amcheck $got"
	else
		echo "FAIL $name: amcheck: $got"
		return 1
	fi
}
