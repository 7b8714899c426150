# test/lib/checks.sh — assertions shared by the shell tests.
#
# The sourcing test sets $db (the database the checks query) and reads
# $violations at the end; every failed check adds one and prints why.

violations=0
q() { psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" "$@"; }
now_ms() { date +%s%3N; }

# check NAME EXPECTED SQL: the query's single value must equal EXPECTED.
check() {
	local name=$1 expected=$2 got
	got=$(q -c "$3" 2>&1)
	if [ "$got" = "$expected" ]; then
		echo "ok   $name ($got)"
	else
		echo "FAIL $name: expected [$expected], got [$got]"
		violations=$((violations + 1))
	fi
}

# assert NAME CONDITION...: a shell test.
assert() {
	local name=$1
	shift
	if "$@"; then
		echo "ok   $name"
	else
		echo "FAIL $name"
		violations=$((violations + 1))
	fi
}

# wait_for SECONDS EXPECTED SQL: poll until SQL answers EXPECTED; false on timeout.
wait_for() {
	local deadline=$(($(now_ms) + $1 * 1000)) got=
	while [ "$(now_ms)" -le $deadline ]; do
		got=$(q -c "$3" 2>/dev/null)
		[ "$got" = "$2" ] && return 0
		sleep 0.1
	done
	echo "     waited $1 s for [$3] = [$2], last answer [$got]"
	return 1
}
