# test/lib/citus.sh — Citus, for the tests that run pqrun on a Citus cluster.
#
# Citus is not packaged for these machines; its source is vendored beside
# the repository (../shared/vendor, with a README). citus_ensure builds and
# installs it for the server on PATH when it is not installed yet; a
# version's root (test/lib/pg_root.sh) keeps the build, so it is made once.
# A user's machine installs Citus from Citus's own packages instead. (With
# libcurl, which PostgreSQL 18's own headers ask for; a build from source
# sends Citus no usage statistics either way.)

CITUS_VERSION=14.0.1
CITUS_EXTVERSION=14.0-1

# citus_ensure REPO: 0 when Citus $CITUS_VERSION is installed for this
# server, building it when it is not; otherwise prints why not and answers
# 1 where Citus cannot be had (the tests then skip), 2 when building it
# failed (the tests then fail).
citus_ensure() {
	local repo=$1 major tarball build
	major=$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
	if [ "$major" -lt 16 ]; then
		echo "Citus $CITUS_VERSION needs PostgreSQL 16 or later; this server is $major"
		return 1
	fi
	grep -qs "default_version = '$CITUS_EXTVERSION'" "$(pg_config --sharedir)/extension/citus.control" &&
		[ -f "$(pg_config --pkglibdir)/citus.so" ] && return 0
	tarball=$(cd "$repo/.." && pwd)/shared/vendor/citus-$CITUS_VERSION.tar.gz
	if [ ! -f "$tarball" ]; then
		echo "Citus is not installed and its source $tarball is absent"
		return 1
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "Citus is not installed, and building it needs root"
		return 2
	fi
	echo "== building Citus $CITUS_VERSION for PostgreSQL $major"
	# The vendor README's list, one package at a time: a Debian snapshot may
	# not have every one installable together (sid's libselinux1-dev), and
	# the build needs only the headers PostgreSQL's own include.
	local p missing=()
	export DEBIAN_FRONTEND=noninteractive
	for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev libicu-dev libselinux1-dev \
		libxslt1-dev libpam0g-dev libreadline-dev zlib1g-dev; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1; } ||
			missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] || echo "not installable here, building without: ${missing[*]}"
	build=$(mktemp -d /tmp/citus-build.XXXXXX)
	tar -xzf "$tarball" -C "$build" &&
		(cd "$build/citus-$CITUS_VERSION" && ./configure >"$build/configure.log" 2>&1 &&
			make -j2 >"$build/make.log" 2>&1 && make install >"$build/install.log" 2>&1) ||
		{ tail -n 30 "$build"/*.log; rm -rf "$build"; echo "building Citus failed"; return 2; }
	rm -rf "$build"
}
