# test/lib/python.sh — the python3 that the Python-driven shell tests run.
#
# find_psycopg_python: sets $py to the first of $PQRUN_PYTHON, python3 and
# /usr/bin/python3 that can import psycopg 3, or says why not and fails.
find_psycopg_python() {
	local candidate
	py=
	for candidate in ${PQRUN_PYTHON:-} python3 /usr/bin/python3; do
		if "$candidate" -c 'import psycopg' 2>/dev/null; then
			py=$candidate
			return 0
		fi
	done
	echo "FAIL: no python3 that can 'import psycopg' (psycopg 3); on Debian: apt-get install python3-psycopg"
	return 1
}
