#!/usr/bin/env bash
# test/packages/node_client.sh — the Node.js client (clients/node, package
# pqrun) as a user gets it: packed, installed from the tarball, and its tests
# run against the installed copy.
#
# 1. `npm pack` in clients/node: pqrun-X.Y.Z.tgz, X.Y.Z being its
#    package.json's version, holding package.json, README.md, index.d.ts and
#    src/ (what "files" lists) and nothing else: no tests, no lockfile, no
#    node_modules;
# 2. an empty project (outside the repository) `npm install`s the tarball,
#    its dependency pg coming from the registry, with the compiler and
#    @types/pg at clients/node's devDependency versions for the type check;
#    `pqrun` resolves to node_modules/pqrun there, a copy, not a link;
# 3. clients/node/test copied into that project and run with
#    `node --test test/*.test.js`: each test file imports `pqrun` (so the
#    installed package, its "exports" and its index.d.ts), creates a database
#    of its own on the server in PGHOST/PGPORT and drops it. They check the
#    producer calls (in the caller's transaction, batch, dedupe, delays,
#    dependencies, FIFO, concurrency keys, SQLSTATEs as error classes), the
#    worker (handlers, concurrency, long-poll wake-up, finish-and-claim,
#    claims in batches of the free slots, heartbeats with progress, a cancel
#    aborting ctx.signal, snoozes, release at shutdown and on SIGTERM,
#    retryable and terminal errors, validation) and the declarations with
#    `tsc --noEmit`.
# Needs node 18 or later and npm (installed from Debian when missing).
# Budget: 2 minutes (about 30 s with npm's cache warm; the tests take 15).
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
client=$repo/clients/node
source "$repo/test/lib/need_packages.sh"
if ! command -v node >/dev/null; then
	need_packages nodejs || { echo "could not install nodejs"; exit 77; }
fi
if ! command -v npm >/dev/null; then
	need_packages npm || { echo "could not install npm"; exit 77; }
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || { echo "node $(node --version) is too old, the client needs 18 or later"; exit 77; }

work=$(mktemp -d "${PQRUN_WORK:-/tmp}/node-client.XXXXXX")
run=$$
failures=0
cleanup() {
	# what a killed test file left
	psql -X -qtA -d postgres -c "SELECT datname FROM pg_database WHERE datname LIKE 'pqrun\_node\_%\_$run'" 2>/dev/null |
		while read -r leftover; do
			[ -n "$leftover" ] && psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $leftover WITH (FORCE)" >/dev/null 2>&1
		done
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
ok() { echo "ok   $*"; }

echo "-- npm pack in clients/node (node $(node --version), npm $(npm --version))"
version=$(node -p "require('$client/package.json').version")
tarball=$work/pqrun-$version.tgz
(cd "$client" && npm pack --pack-destination "$work") >"$work/pack.log" 2>&1 ||
	{ cat "$work/pack.log"; echo "npm pack failed"; exit 1; }
[ -f "$tarball" ] || { cat "$work/pack.log"; echo "npm pack made no $(basename "$tarball")"; exit 1; }
contents=$(tar -tzf "$tarball" | sort | tr '\n' ' ')
expected=$(cd "$client" && { printf 'package/%s\n' package.json README.md index.d.ts; find src -type f -printf 'package/%p\n'; } |
	sort | tr '\n' ' ')
if [ "$contents" = "$expected" ]; then
	ok "$(basename "$tarball"), $(du -k "$tarball" | cut -f1) kB: $contents"
else
	fail "the tarball holds [$contents], expected [$expected]"
fi
fields=$(tar -xzOf "$tarball" package/package.json | node -e '
	const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
	console.log([p.name, p.version, p.type, p.license, p.engines?.node, p.types, p.exports?.["."]?.types,
		p.exports?.["."]?.default, Object.keys(p.dependencies ?? {}).join(",")].join(" "))')
if [ "$fields" = "pqrun $version module PostgreSQL >=18 ./index.d.ts ./index.d.ts ./src/index.js pg" ]; then
	ok "package.json: $fields"
else
	fail "package.json: $fields"
fi

echo "-- npm install ./$(basename "$tarball") in an empty project"
app=$work/app
mkdir "$app"
mv "$tarball" "$app/"
# the type check's compiler and pg's types, at the versions clients/node locks
node -e '
	const dev = require(process.argv[1]).devDependencies;
	const app = { name: "pqrun-installed-check", private: true, type: "module",
		devDependencies: { typescript: dev.typescript, "@types/pg": dev["@types/pg"] } };
	require("fs").writeFileSync(process.argv[2], JSON.stringify(app, null, 2) + "\n");' \
	"$client/package.json" "$app/package.json"
start=$SECONDS
(cd "$app" && npm install --no-audit --no-fund "./$(basename "$tarball")") >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; echo "npm install of the tarball failed"; exit 1; }
ok "installed in $((SECONDS - start)) s: pqrun $(node -p "require('$app/node_modules/pqrun/package.json').version"), pg $(node -p "require('$app/node_modules/pg/package.json').version")"
resolved=$(cd "$app" && node -p "require.resolve('pqrun')")
if [ "$resolved" = "$app/node_modules/pqrun/src/index.js" ] && [ ! -L "$app/node_modules/pqrun" ]; then
	ok "pqrun resolves to the installed copy: $resolved"
else
	fail "pqrun resolves to $resolved"
fi

echo "-- the client's tests against the installed package"
cp -r "$client/test" "$app/test"
start=$SECONDS
(cd "$app" && PQRUN_TEST_RUN=$run timeout 100 node --test test/*.test.js) >"$work/test.log" 2>&1
rc=$?
grep -E '^(not )?ok [0-9]+ - ' "$work/test.log"
if [ $rc = 0 ]; then
	ok "node --test: $(grep -E '^# (pass|fail) ' "$work/test.log" | tr '\n' ' ')in $((SECONDS - start)) s"
else
	echo "--- node --test output (status $rc)"
	cat "$work/test.log"
	fail "node --test exited $rc"
fi

if [ $failures = 0 ]; then
	echo "node client: every check passed"
else
	echo "node client: $failures checks failed"
	exit 1
fi
