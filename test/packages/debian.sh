#!/usr/bin/env bash
# test/packages/debian.sh — the Debian packages built from debian/ install and
# work where no compiler ever ran.
#
# For each PostgreSQL major (15, 17, 18; PQRUN_DEB_MAJORS to choose), in the
# Debian release that carries it (bookworm, the machine itself; trixie and
# sid in the cached roots of test/lib/pg_root.sh):
#   1. debian/changelog and META.json carry pqrun.control's default_version;
#   2. `pg_buildext updatecontrol`, the build dependencies, then
#      `dpkg-buildpackage -b` with warnings as errors: the package's own
#      build-time installcheck (regression and isolation suites) runs too;
#   3. lintian reports no error;
#   4. the .deb goes into a fresh minbase root of that release (no compiler,
#      no server headers; a pristine tarball cached in $PQRUN_PG_ROOTS,
#      unpacked anew each run) with `apt-get install ./postgresql-NN-pqrun_…`,
#      which fetches postgresql-NN from the machine's mirror; afterwards the
#      root still has no compiler and no headers;
#   5. `dpkg -L` lists nothing outside /usr/lib/postgresql/NN/lib,
#      /usr/share/postgresql/NN/extension and /usr/share/doc;
#   6. a cluster of the installed server, run by its `postgres` user with pqrun
#      preloaded (port 54550): CREATE EXTENSION, a job enqueued, picked up and
#      marked done, the database's maintenance worker in pg_stat_activity,
#      and a job whose timeout passed reaped back to READY by it;
#   7. the repository's regression suite (REGRESS in the Makefile, sql/ and
#      expected/) against that server, pg_regress run from the build side
#      over TCP: the server and the extension's files are the package's.
# The fresh roots are removed afterwards; the build roots are reused. With
# PQRUN_DEB_OUT set, the packages built are copied there.
#
# Budget: 20 minutes on a new machine (three debootstraps, the build
# dependencies, the downloads), 4 minutes once those are cached.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/pg_root.sh"
source "$repo/test/lib/need_packages.sh"

[ "$(id -u)" = 0 ] || { echo "needs root (debootstrap, chroot)"; exit 77; }
majors=${PQRUN_DEB_MAJORS:-15 17 18}
port=54550
host_major=$(pg_root_host_major)
work=$(mktemp -d "${PQRUN_WORK:-/tmp}/debian.XXXXXX")
chmod 755 "$work"
failures=0
fresh=      # the fresh root in use, for cleanup
host_build= # the build directory on the machine itself, for cleanup

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# root_umount DIR: everything mounted inside DIR, deepest first.
root_umount() {
	local m
	for m in $(awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -R "$m" 2>/dev/null || umount -l "$m"
	done
}

# remove_root DIR: remove a root, never while anything is mounted inside it
# (a bound /dev would go with it).
remove_root() {
	root_umount "$1"
	if grep -q " $1/" /proc/mounts; then
		echo "$1 still has mounts inside; left in place" >&2
		return 1
	fi
	rm -rf "$1"
}

# root_in_use DIR: another process runs inside DIR (a matrix run of
# test/run.sh in the same build root): its mounts stay.
root_in_use() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$1" ] && return 0
	done
	return 1
}

cleanup() {
	if [ -n "$fresh" ]; then
		stop_fresh_cluster
		remove_root "$fresh"
	fi
	for m in $majors; do
		[ "$m" = "$host_major" ] && continue
		[ -d "$PQRUN_PG_ROOTS/$m/src/pqrun-deb" ] && rm -rf "$PQRUN_PG_ROOTS/$m/src/pqrun-deb"
		root_in_use "$PQRUN_PG_ROOTS/$m" || pg_root_umount "$PQRUN_PG_ROOTS/$m"
	done
	[ -n "$host_build" ] && rm -rf "$host_build"
	rm -rf "$work"
}
trap cleanup EXIT

# in_root DIR CMD...: run CMD as root inside DIR with a clean environment.
in_root() {
	local dir=$1
	shift
	chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

version=$(sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$repo/pqrun.control")
echo "== pqrun $version"

# 1. The release's version is everywhere a package takes it from.
changelog_version=$(sed -n '1s/^pqrun (\([^)]*\)).*/\1/p' "$repo/debian/changelog")
[ "${changelog_version%-*}" = "$version" ] ||
	fail "debian/changelog is at $changelog_version, pqrun.control at $version"
meta_versions=$(python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["version"], m["provides"]["pqrun"]["version"])' "$repo/META.json" 2>&1)
[ "$meta_versions" = "$version $version" ] ||
	fail "META.json's version and provides.pqrun.version are [$meta_versions], pqrun.control says $version"

# The sources a clean clone has: what git tracks and any new file it does not
# ignore, less the install script a build made (sql/pqrun--X.Y.Z.sql), which
# would be packaged as a version of its own.
src=$work/src/pqrun
mkdir -p "$src"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$repo" && { git ls-files -c; git ls-files -o --exclude-standard | grep -Ev '^sql/pqrun--[0-9.]+\.sql$'; } |
		sort -u | while IFS= read -r f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar -c --null -T - | tar -x -C "$src")
else
	(cd "$repo" && tar -c --exclude='*.o' --exclude='*.so' --exclude=results . | tar -x -C "$src")
fi

# The build, the same in every release: the packaging tools, the control file
# for this release's PostgreSQL, the build dependencies, the packages (the
# build-time installcheck included), and lintian on them.
# The roots have the machine's apt settings, some of which packages ship as
# conffiles too (appstream's, which lintian needs): the settings stay.
build_script='set -eo pipefail
cd "$1"
apt_install() {
	apt-get "$@" -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
}
tools="debhelper dpkg-dev lintian postgresql-server-dev-all"
apt_install install $tools >/dev/null 2>&1 || { apt-get update -qq && apt_install install $tools >/dev/null; }
pg_buildext updatecontrol
apt_install build-dep ./ >../build-dep.log 2>&1 || { cat ../build-dep.log; exit 1; }
ERROR_ON_WARNING=1 dpkg-buildpackage -b -us -uc >../build.log 2>&1 || { tail -n 60 ../build.log; exit 1; }
grep -E "^### End|tests passed|tests failed" ../build.log | sed "s/^/    build-time installcheck: /"
for deb in ../postgresql-*-pqrun_*.deb; do
	status=0
	lintian --fail-on error "$deb" >../lintian.log 2>&1 || status=$?
	echo "    lintian $(basename "$deb"): exit status $status"
	grep -v "^running with root privileges" ../lintian.log | sed "s/^/    /" || true
	[ $status = 0 ]
done'

# build MAJOR: build MAJOR's packages; the .deb lands in $work/debs.
build() {
	local major=$1 root dir
	mkdir -p "$work/debs"
	if [ "$major" = "$host_major" ]; then
		need_packages debhelper dpkg-dev lintian postgresql-server-dev-all || return 1
		# The build-time installcheck's server runs as postgres (we are root)
		# and reads the packaged files: every directory above them must let it
		# through, which $PQRUN_WORK's parents need not.
		host_build=$(mktemp -d /var/tmp/pqrun-deb-build.XXXXXX) && chmod 755 "$host_build" || return 1
		dir=$host_build
		cp -a "$src" "$dir/" || return 1
		# Not the test cluster's PG* settings: pg_virtualenv, which runs the
		# build-time installcheck, would start its server on that port.
		env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE bash -c "$build_script" build "$dir/pqrun" || return 1
	else
		root=$(pg_root_make "$major") || return 1
		dir=$root/src/pqrun-deb
		rm -rf "$dir" && mkdir -p "$dir" && cp -a "$src" "$dir/" || return 1
		pg_root_mount "$root"
		in_root "$root" bash -c "$build_script" build /src/pqrun-deb/pqrun
		local status=$?
		root_in_use "$root" || pg_root_umount "$root"
		[ $status = 0 ] || return 1
	fi
	cp "$dir"/postgresql-"$major"-pqrun_*.deb "$work/debs/" || return 1
	[ -z "${PQRUN_DEB_OUT:-}" ] || { mkdir -p "$PQRUN_DEB_OUT" && cp "$dir"/postgresql-"$major"-pqrun_*.deb "$PQRUN_DEB_OUT/"; }
}

# fresh_tarball MAJOR: a tarball of a pristine minbase root of MAJOR's
# release, made once and cached; prints its path.
fresh_tarball() {
	local release tarball tmp mirror
	release=$(pg_root_release "$1") || return 1
	tarball=$PQRUN_PG_ROOTS/fresh-$release.tar
	if [ ! -e "$tarball" ]; then
		command -v debootstrap >/dev/null || need_packages debootstrap || return 1
		mirror=$(pg_root_mirror) || { echo "no Debian mirror in the machine's apt sources" >&2; return 1; }
		mkdir -p "$PQRUN_PG_ROOTS"
		tmp=$(mktemp -d "$PQRUN_PG_ROOTS/.fresh-$release.XXXXXX") && chmod 755 "$tmp"
		echo "== making a pristine Debian $release root" >&2
		if ! debootstrap --variant=minbase "$release" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
			tail -n 20 "$tmp.log" >&2
			remove_root "$tmp"
			rm -f "$tmp.log"
			return 1
		fi
		rm -f "$tmp.log"
		# As a user's machine would be, but without a server of its own on 5432.
		mkdir -p "$tmp/etc/postgresql-common"
		echo 'create_main_cluster = false' >"$tmp/etc/postgresql-common/createcluster.conf"
		printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d" && chmod 755 "$tmp/usr/sbin/policy-rc.d"
		root_umount "$tmp"
		tar -C "$tmp" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball" || { rm -f "$tarball.tmp"; remove_root "$tmp"; return 1; }
		remove_root "$tmp"
	fi
	echo "$tarball"
}

# release_sources RELEASE: one-line apt sources for RELEASE: the machine's own
# entries for it and its -updates and -security suites (main) where the
# machine runs RELEASE, as its packages were built against them; else its
# mirror's RELEASE main, as test/lib/pg_root.sh gives its roots.
release_sources() {
	local release=$1 lines mirror
	lines=$(
		awk -v rel="$release" 'BEGIN { RS = ""; FS = "\n" }
		{
			t = u = s = ""; on = 1
			for (i = 1; i <= NF; i++) {
				l = $i
				if (l ~ /^Types:/) { sub(/^Types:[ \t]*/, "", l); t = l }
				else if (l ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", l); u = l }
				else if (l ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", l); s = l }
				else if (l ~ /^Enabled:[ \t]*no/) on = 0
			}
			if (!on || t !~ /(^| )deb( |$)/) next
			n = split(u, U, " "); m = split(s, S, " ")
			for (a = 1; a <= n; a++) for (b = 1; b <= m; b++)
				if (S[b] == rel || index(S[b], rel "-") == 1) print "deb " U[a] " " S[b] " main"
		}' /etc/apt/sources.list.d/*.sources 2>/dev/null
		awk -v rel="$release" '$1 == "deb" {
			i = 2
			if ($2 ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == rel || index($(i + 1), rel "-") == 1) print "deb " $i " " $(i + 1) " main"
		}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
	)
	if [ -n "$lines" ]; then
		sort -u <<<"$lines"
	else
		mirror=$(pg_root_mirror) || return 1
		echo "deb $mirror $release main"
	fi
}

# Downloads of the fresh roots are kept between runs (the roots are not).
fresh_apt() {
	in_root "$fresh" apt-get -o Dir::Cache::Archives=/var/cache/pqrun-debs/ -o APT::Sandbox::User=root \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

stop_fresh_cluster() {
	[ -n "$fresh" ] && [ -d "$fresh/var/tmp/pqrun-pkg/data" ] &&
		in_root "$fresh" runuser -u postgres -- "/usr/lib/postgresql/$fresh_major/bin/pg_ctl" \
			-D /var/tmp/pqrun-pkg/data -m immediate -w stop >/dev/null 2>&1
	return 0
}

# fpsql ARGS...: psql of the fresh root, as its postgres user, on its cluster.
fpsql() {
	in_root "$fresh" runuser -u postgres -- psql -X -qtA -v ON_ERROR_STOP=1 -h /var/tmp/pqrun-pkg -p $port "$@"
}

# wait_for WHAT SQL: poll SQL (in database pqrun_smoke) for up to 15 s
# until it returns t.
wait_for() {
	for _ in $(seq 1 30); do
		[ "$(fpsql -d pqrun_smoke -c "$2" 2>/dev/null)" = t ] && { echo "ok   $1"; return 0; }
		sleep 0.5
	done
	fail "$1: not within 15 s"
	return 1
}

# install_and_run MAJOR: steps 4 to 7 for MAJOR's package.
install_and_run() {
	local major=$1 tarball deb cache bad listed regress_dir status
	fresh_major=$major
	tarball=$(fresh_tarball "$major") || { fail "PostgreSQL $major: no pristine root"; return; }
	deb=$(ls "$work"/debs/postgresql-"$major"-pqrun_*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || { fail "PostgreSQL $major: no package built"; return; }

	fresh=$work/fresh-$major
	# The root directory's mode comes from the tarball: / of the root must let
	# the postgres user through.
	mkdir -p "$fresh" && tar -C "$fresh" -xf "$tarball" && chmod 755 "$fresh" || { fail "could not unpack $tarball"; return; }
	release_sources "$(pg_root_release "$major")" >"$fresh/etc/apt/sources.list" || { fail "no apt sources"; return; }
	cp /etc/apt/apt.conf.d/* "$fresh/etc/apt/apt.conf.d/" 2>/dev/null
	cp /etc/resolv.conf "$fresh/etc/resolv.conf" 2>/dev/null
	cache=$PQRUN_PG_ROOTS/fresh-debs/$(pg_root_release "$major")
	mkdir -p "$cache/partial" "$fresh/var/cache/pqrun-debs"
	mount --bind "$cache" "$fresh/var/cache/pqrun-debs"
	pg_root_mount "$fresh"
	cp "$deb" "$fresh/tmp/"

	echo "-- apt-get install ./$(basename "$deb") in a fresh $(pg_root_release "$major") root"
	if ! { fresh_apt update -qq && fresh_apt install -y -q --no-install-recommends "/tmp/$(basename "$deb")"; } >"$work/install-$major.log" 2>&1; then
		tail -n 30 "$work/install-$major.log"
		in_root "$fresh" apt-cache policy "postgresql-$major" 2>&1 | sed -E 's#[a-z]+://[^ ]+#(mirror)#'
		fail "PostgreSQL $major: the package did not install"
		return
	fi
	for bad in /usr/bin/gcc /usr/bin/g++ /usr/bin/cc /usr/bin/c++ /usr/include/postgresql; do
		[ -e "$fresh$bad" ] && fail "PostgreSQL $major: the fresh root has $bad"
	done
	in_root "$fresh" dpkg-query -W -f='${db:Status-Status} ${Package}\n' 'postgresql-server-dev-*' 2>/dev/null | grep -q '^installed' &&
		fail "PostgreSQL $major: server headers were installed"

	listed=$(in_root "$fresh" dpkg -L "postgresql-$major-pqrun" | grep -Ev "^(/\.|/usr|/usr/lib|/usr/lib/postgresql|/usr/lib/postgresql/$major|/usr/lib/postgresql/$major/lib(/.*)?|/usr/share|/usr/share/postgresql|/usr/share/postgresql/$major|/usr/share/postgresql/$major/extension(/.*)?|/usr/share/doc(/.*)?)$")
	if [ -n "$listed" ]; then
		fail "PostgreSQL $major: the package installs outside PostgreSQL's directories and /usr/share/doc:"
		echo "$listed"
	else
		echo "ok   dpkg -L: $(in_root "$fresh" dpkg -L "postgresql-$major-pqrun" | grep -c '\.sql$') scripts, the library and the docs, all in place"
	fi
	in_root "$fresh" test -f "/usr/share/doc/postgresql-$major-pqrun/README.md.gz" ||
		fail "PostgreSQL $major: no README in /usr/share/doc"

	echo "-- a cluster of the installed server with pqrun preloaded"
	in_root "$fresh" install -d -o postgres -g postgres /var/tmp/pqrun-pkg
	if ! in_root "$fresh" runuser -u postgres -- "/usr/lib/postgresql/$major/bin/initdb" -D /var/tmp/pqrun-pkg/data \
		-U postgres --auth=trust --no-sync -E UTF8 --locale=C >"$work/initdb-$major.log" 2>&1; then
		cat "$work/initdb-$major.log"
		fail "PostgreSQL $major: initdb"
		return
	fi
	{
		echo "port = $port"
		echo "unix_socket_directories = '/var/tmp/pqrun-pkg'"
		echo "listen_addresses = '127.0.0.1'"
		echo "shared_preload_libraries = 'pqrun'"
		cat "$repo/test/pqrun.conf"
	} >>"$fresh/var/tmp/pqrun-pkg/data/postgresql.conf"
	if ! in_root "$fresh" runuser -u postgres -- "/usr/lib/postgresql/$major/bin/pg_ctl" -D /var/tmp/pqrun-pkg/data \
		-l /var/tmp/pqrun-pkg/server.log -w -t 60 start >/dev/null; then
		tail -n 20 "$fresh/var/tmp/pqrun-pkg/server.log"
		fail "PostgreSQL $major: the server did not start"
		return
	fi

	fpsql -d postgres -c "CREATE DATABASE pqrun_smoke" && fpsql -d pqrun_smoke -c "CREATE EXTENSION pqrun" ||
		{ fail "PostgreSQL $major: CREATE EXTENSION pqrun"; return; }
	check_smoke "$major"

	echo "-- pg_regress against the installed package"
	# pg_regress reaches the server over TCP: make sure it is this one.
	[ "$(fpsql -h 127.0.0.1 -d postgres -c "SHOW data_directory")" = /var/tmp/pqrun-pkg/data ] ||
		{ fail "PostgreSQL $major: 127.0.0.1:$port is not the fresh root's server"; return; }
	# Its inputs are copied where the build side's postgres user reads them.
	regress_dir=/var/tmp/pqrun-deb-regress-$$
	local side=/ regress
	[ "$major" = "$host_major" ] || side=$PQRUN_PG_ROOTS/$major
	regress="chown -R postgres: $regress_dir && cd $regress_dir &&
		runuser -u postgres -- /usr/lib/postgresql/$major/lib/pgxs/src/test/regress/pg_regress \
		--inputdir=$regress_dir --outputdir=$regress_dir/out --bindir=/usr/lib/postgresql/$major/bin \
		--host=127.0.0.1 --port=$port --user=postgres --dbname=pqrun_pkg_regress \
		$(sed -n 's/^REGRESS *= *//p' "$src/Makefile")"
	rm -rf "${side%/}$regress_dir" && mkdir -p "${side%/}$regress_dir/out" &&
		cp -r "$src/sql" "$src/expected" "${side%/}$regress_dir/" || { fail "could not copy the regression inputs"; return; }
	if [ "$side" = / ]; then
		bash -c "$regress" >"$work/regress-$major.log" 2>&1
		status=$?
	else
		pg_root_mount "$side"
		in_root "$side" bash -c "$regress" >"$work/regress-$major.log" 2>&1
		status=$?
		root_in_use "$side" || pg_root_umount "$side"
	fi
	[ $status != 0 ] && [ -f "${side%/}$regress_dir/out/regression.diffs" ] && head -n 80 "${side%/}$regress_dir/out/regression.diffs"
	rm -rf "${side%/}$regress_dir"
	grep -E '^(not )?ok |\.\.\. |tests (passed|failed)|All [0-9]+ tests' "$work/regress-$major.log" | sed 's/^/    /'
	if [ $status = 0 ]; then
		echo "ok   pg_regress ($(sed -n 's/^REGRESS *= *//p' "$src/Makefile" | wc -w) tests)"
	else
		tail -n 5 "$work/regress-$major.log"
		fail "PostgreSQL $major: pg_regress against the installed package"
	fi
}

# check_smoke MAJOR: a job end to end, and the background worker's effect.
check_smoke() {
	local out job tjob
	out=$(fpsql -d pqrun_smoke <<'SQL'
SELECT pqrun.enqueue('smoke', '{"n": 1}') AS job \gset
SELECT id AS picked, lease_token AS lease FROM pqrun.pickup('smoke-worker', job_types => '{smoke}') \gset
SELECT pqrun.mark_done(:picked, '{"ok": true}', lease_token => :'lease') \gset
SELECT :job, :picked, status, result::text FROM pqrun.jobs WHERE id = :job;
SQL
	)
	job=${out%%|*}
	if [[ "$out" =~ ^([0-9]+)\|([0-9]+)\|DONE\|\{\"ok\":\ true\}$ ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
		echo "ok   enqueue, pickup and mark_done of job $job"
	else
		fail "PostgreSQL $1: enqueue, pickup, mark_done: got [$out]"
	fi
	wait_for "the database's maintenance worker runs" \
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = current_database()"
	tjob=$(fpsql -d pqrun_smoke -c "SELECT pqrun.enqueue('smoke_timeout', '{}', timeout_seconds => 1)")
	[ "$(fpsql -d pqrun_smoke -c "SELECT count(*) FROM pqrun.pickup('smoke-worker', job_types => '{smoke_timeout}')")" = 1 ] ||
		fail "PostgreSQL $1: pickup of the job with a timeout"
	wait_for "the maintenance worker reaps job $tjob when its timeout passes" \
		"SELECT status = 'READY' AND locked_by IS NULL FROM pqrun.jobs WHERE id = $tjob"
}

for major in $majors; do
	echo "=== PostgreSQL $major ($(pg_root_release "$major"))"
	start=$SECONDS
	echo "-- build and lintian"
	if ! build "$major"; then
		fail "PostgreSQL $major: build or lintian"
		continue
	fi
	echo "ok   built and linted in $((SECONDS - start)) s"
	install_and_run "$major"
	stop_fresh_cluster
	remove_root "$fresh" || fail "could not remove $fresh"
	fresh=
	echo "   PostgreSQL $major took $((SECONDS - start)) s"
done

if [ $failures = 0 ]; then
	echo "debian: every check passed"
else
	echo "debian: $failures checks failed"
	exit 1
fi
