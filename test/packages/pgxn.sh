#!/usr/bin/env bash
# test/packages/pgxn.sh — the PGXN release: `make dist` in a clean clone of
# this repository's HEAD, its META.json, and the zip installed and used as a
# PGXN user would.
#
# 1. `git clone` of HEAD (what is committed, as CI has it), `make dist` there:
#    pqrun-X.Y.Z.zip, X.Y.Z being pqrun.control's default_version, every
#    file under pqrun-X.Y.Z/, what .gitattributes leaves out left out;
# 2. META.json against the PGXN Meta Spec 1.0.0 (pgxnclient has no validator:
#    the spec's required keys, types and values, checked with python3): its
#    version and provides.pqrun.version are the control file's, the files it
#    names are in the zip, the runtime prereq is PostgreSQL 15 or later;
# 3. Debian's pgxnclient: `pgxn install ./pqrun-X.Y.Z.zip` builds and installs
#    into the machine's PostgreSQL (the version the test server runs, with
#    the same code), `pgxn check` runs the zip's regression and isolation
#    suites against the running test server, `pgxn load` creates the
#    extension in a fresh database;
# 4. a smoke job there: enqueue, pickup, mark_done, and the database's
#    maintenance worker in pg_stat_activity.
# Runs against the server in PGHOST/PGPORT (it preloads pqrun), in databases
# of its own that it drops. Budget: 3 minutes (about one, mostly the build).
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/pg_root.sh"
source "$repo/test/lib/need_packages.sh"
need_packages pgxnclient git make || { echo "could not install pgxnclient"; exit 77; }

major=$(pg_root_host_major)
pg_config=/usr/lib/postgresql/$major/bin/pg_config
work=$(mktemp -d "${PQRUN_WORK:-/tmp}/pgxn.XXXXXX")
db=pqrun_pgxn_$$
check_db=pqrun_pgxn_check_$$
failures=0
cleanup() {
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "DROP DATABASE IF EXISTS $check_db" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
ok() { echo "ok   $*"; }

echo "-- make dist in a clean clone of HEAD"
git clone -q "$repo" "$work/clone" || { echo "could not clone $repo"; exit 1; }
version=$(sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$work/clone/pqrun.control")
zip=$work/clone/pqrun-$version.zip
make -s -C "$work/clone" dist PG_CONFIG="$pg_config" || { echo "make dist failed"; exit 1; }
[ -f "$zip" ] || { echo "make dist made no pqrun-$version.zip: $(ls "$work/clone"/*.zip 2>/dev/null)"; exit 1; }
ok "make dist: $(basename "$zip"), $(du -k "$zip" | cut -f1) kB"

echo "-- the zip and its META.json"
if python3 - "$zip" "$version" <<'PY'; then ok "META.json follows the PGXN Meta Spec 1.0.0, at version $version"; else fail "META.json or the zip"; fi
import json, re, sys, zipfile

path, version = sys.argv[1], sys.argv[2]
prefix = "pqrun-%s/" % version
errors = []
z = zipfile.ZipFile(path)
names = z.namelist()
if not all(n.startswith(prefix) for n in names):
    errors.append("entries outside %s: %s" % (prefix, [n for n in names if not n.startswith(prefix)][:5]))
for needed in ("META.json", "Makefile", "pqrun.control", "sql/pqrun.sql", "README.md", "src/pqrun.cpp"):
    if prefix + needed not in names:
        errors.append("the zip lacks " + needed)
if any(n.startswith(prefix + "bench/results/") for n in names):
    errors.append("the zip has bench/results/ (export-ignore)")
meta = json.loads(z.read(prefix + "META.json"))

semver = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([a-zA-Z][a-zA-Z0-9-]*)?$")
version_range = re.compile(r"^\s*((==|!=|>=|<=|>|<)\s*)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){0,2}([a-zA-Z][a-zA-Z0-9-]*)?\s*$")
licenses = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd", "gfdl_1_2",
            "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1",
            "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
            "restricted", "unrestricted", "unknown"}

def need(key, kind):
    if key not in meta:
        errors.append("missing required key %r" % key)
        return None
    if not isinstance(meta[key], kind):
        errors.append("%r is not a %s" % (key, kind))
        return None
    return meta[key]

name = need("name", str)
if name is not None and (len(name) < 2 or re.search(r"[/\\\s\x00-\x1f]", name) or name != "pqrun"):
    errors.append("name %r" % name)
if not (need("abstract", str) or "").strip():
    errors.append("empty abstract")
v = need("version", str)
if v is not None and not semver.match(v):
    errors.append("version %r is not a semantic version" % v)
if v != version:
    errors.append("version %r, but pqrun.control says %s" % (v, version))
maintainer = need("maintainer", (str, list))
if isinstance(maintainer, list) and not (maintainer and all(isinstance(m, str) and m.strip() for m in maintainer)):
    errors.append("maintainer must be a non-empty string or list of strings")
lic = need("license", (str, list, dict))
if isinstance(lic, str) and lic not in licenses:
    errors.append("license %r is not one of the spec's" % lic)
if meta.get("license") != "postgresql":
    errors.append("license is not 'postgresql'")
spec = need("meta-spec", dict)
if spec is not None and spec.get("version") != "1.0.0":
    errors.append("meta-spec.version is not 1.0.0")
provides = need("provides", dict) or {}
if "pqrun" not in provides:
    errors.append("provides has no pqrun")
for ext, p in provides.items():
    for key in ("file", "version"):
        if key not in p:
            errors.append("provides.%s lacks %s" % (ext, key))
    if p.get("version") and not semver.match(p["version"]):
        errors.append("provides.%s.version %r is not a semantic version" % (ext, p["version"]))
    for key in ("file", "docfile"):
        if key in p and prefix + p[key] not in names:
            errors.append("provides.%s.%s names %s, which is not in the zip" % (ext, key, p[key]))
if provides.get("pqrun", {}).get("version") != version:
    errors.append("provides.pqrun.version is not %s" % version)
if meta.get("release_status", "stable") not in ("stable", "testing", "unstable"):
    errors.append("release_status %r" % meta.get("release_status"))
for phase, rels in meta.get("prereqs", {}).items():
    if phase not in ("configure", "build", "test", "runtime", "develop"):
        errors.append("prereqs phase %r" % phase)
        continue
    for rel, reqs in rels.items():
        if rel not in ("requires", "recommends", "suggests", "conflicts"):
            errors.append("prereqs.%s relation %r" % (phase, rel))
            continue
        for prereq, ver in reqs.items():
            if not (ver == 0 or all(version_range.match(part) for part in str(ver).split(","))):
                errors.append("prereqs.%s.%s.%s %r is not a version range" % (phase, rel, prereq, ver))
pg = str(meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL", ""))
if not re.match(r"^(>=\s*)?15(\.0){0,2}$", pg):
    errors.append("prereqs.runtime.requires.PostgreSQL is %r, not 15.0.0 (15 or later)" % pg)
for key in meta.get("resources", {}):
    if key not in ("homepage", "bugtracker", "repository") and not key.lower().startswith("x_"):
        errors.append("resources.%s is not a spec key" % key)
for key in ("tags", "no_index", "generated_by", "description"):
    if key in meta and not isinstance(meta[key], (list, dict, str)):
        errors.append("%s has the wrong type" % key)
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
PY

echo "-- pgxn install ./$(basename "$zip") (PostgreSQL $major)"
cd "$work/clone" || exit 1
touch "$work/before-install"
if pgxn install --pg_config "$pg_config" "./$(basename "$zip")" >"$work/install.log" 2>&1; then
	ok "pgxn install built and installed it"
else
	tail -n 30 "$work/install.log"
	fail "pgxn install"
fi
# What the server loads now is what this install wrote, from the zip.
sharedir=$("$pg_config" --sharedir)/extension
# The zip's install script: its sql/pqrun.sql with each \ir line replaced by
# the file under sql/pqrun/ it names, as the Makefile writes it.
expand_zip_sql() {
	python3 - "$zip" "pqrun-$version/sql/" <<'PY'
import sys, zipfile
z, sql = zipfile.ZipFile(sys.argv[1]), sys.argv[2]
lines = z.read(sql + "pqrun.sql").decode().split("\n")
sys.stdout.write("\n".join(z.read(sql + l[4:]).decode().rstrip("\n") if l.startswith("\\ir ") else l for l in lines))
PY
}
[ "$("$pg_config" --pkglibdir)/pqrun.so" -nt "$work/before-install" ] && unzip_sql=$(expand_zip_sql) &&
	[ "$unzip_sql" = "$(cat "$sharedir/pqrun--$version.sql")" ] &&
	grep -q "^default_version = '$version'" "$sharedir/pqrun.control" &&
	ok "installed: pqrun.so just now, pqrun--$version.sql as the zip's sql/pqrun.sql and sql/pqrun/, pqrun.control at $version" ||
	fail "the installed files are not the zip's"

echo "-- pgxn check: the zip's regression and isolation suites against the test server"
# The isolation suite's database is PGXS's isolation_regression: dropped
# afterwards unless it was there before.
iso_db_was_there=$(psql -X -qtA -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'isolation_regression'")
if pgxn check --pg_config "$pg_config" -d "$check_db" "$zip" >"$work/check.log" 2>&1; then
	ok "pgxn check ($(grep -cE ' \.\.\. ok|^ok ' "$work/check.log") tests)"
else
	grep -E 'FAILED|failed|not ok|ERROR' "$work/check.log" | head -n 20
	tail -n 20 "$work/check.log"
	fail "pgxn check"
fi
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $check_db" >/dev/null 2>&1
[ -n "$iso_db_was_there" ] || psql -X -q -d postgres -c "DROP DATABASE IF EXISTS isolation_regression" >/dev/null 2>&1

echo "-- pgxn load, and a smoke job in a fresh database"
psql -X -q -d postgres -c "CREATE DATABASE $db" || { fail "CREATE DATABASE $db"; db=; }
if [ -n "$db" ]; then
	if pgxn load --pg_config "$pg_config" -d "$db" --yes "$zip" >"$work/load.log" 2>&1; then
		ok "pgxn load created the extension"
	else
		cat "$work/load.log"
		fail "pgxn load"
	fi
	q() { psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" "$@"; }
	got=$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")
	[ "$got" = "$version" ] && ok "extension pqrun $got" || fail "extension version [$got], not $version"
	out=$(q <<'SQL'
SELECT pqrun.enqueue('smoke', '{"n": 1}') AS job \gset
SELECT id AS picked, lease_token AS lease FROM pqrun.pickup('smoke-worker', job_types => '{smoke}') \gset
SELECT pqrun.mark_done(:picked, '{"ok": true}', lease_token => :'lease') \gset
SELECT :job, :picked, status, result::text FROM pqrun.jobs WHERE id = :job;
SQL
	)
	if [[ "$out" =~ ^([0-9]+)\|([0-9]+)\|DONE\|\{\"ok\":\ true\}$ ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
		ok "enqueue, pickup and mark_done of job ${BASH_REMATCH[1]}"
	else
		fail "enqueue, pickup, mark_done: got [$out]"
	fi
	for _ in $(seq 1 30); do
		[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = current_database()")" = 1 ] && break
		sleep 0.5
	done
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = current_database()")" = 1 ] &&
		ok "the database's maintenance worker runs" || fail "no maintenance worker for $db within 15 s"
fi

if [ $failures = 0 ]; then
	echo "pgxn: every check passed"
else
	echo "pgxn: $failures checks failed"
	exit 1
fi
