# test/lib/pg_root.sh — a Debian root per PostgreSQL major version, to build
# and test pqrun on versions the machine's own Debian does not package.
#
# Sourced by test/run.sh (PG_MAJORS) and bench/run.sh (BENCH_PG_MAJOR). A
# version's root is made once with `debootstrap --variant=minbase` from the
# Debian release that packages it, kept under $PQRUN_PG_ROOTS/NN and reused;
# the clusters started inside stay throwaway. The root gets the machine's
# own package mirror (read from its apt sources now, never written down
# here) and its apt settings (a dated snapshot: sid's Release file has
# expired, and only the machine's Acquire::Check-Valid-Until lets apt use it).

PQRUN_PG_ROOTS=${PQRUN_PG_ROOTS:-/var/cache/pqrun-pg}

# pg_root_release MAJOR: the Debian release whose default PostgreSQL is MAJOR.
pg_root_release() {
	case $1 in
	15) echo bookworm ;;
	17) echo trixie ;;
	18) echo sid ;;
	*) return 1 ;;
	esac
}

# pg_root_host_major: the major version of the machine's own PostgreSQL (the
# one test/lib/install_deps.sh installs), run without a root.
pg_root_host_major() {
	. /etc/os-release
	case ${VERSION_CODENAME:-} in
	bookworm) echo 15 ;;
	trixie) echo 17 ;;
	*) pg_config --version 2>/dev/null | sed -E 's/^PostgreSQL ([0-9]+).*/\1/' ;;
	esac
}

# pg_root_mirror: the URI of the machine's Debian archive (not its security
# archive), from its deb822 sources or its one-line sources.list.
pg_root_mirror() {
	local uri
	uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null)
	[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
	[ -n "$uri" ] && echo "$uri"
}

# pg_root_mount DIR / pg_root_umount DIR: what PostgreSQL needs inside a
# root: /proc, and /dev with its shared memory.
pg_root_mount() {
	mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
	mountpoint -q "$1/dev" || mount --rbind /dev "$1/dev"
	mount --make-rslave "$1/dev"
}
pg_root_umount() {
	umount -R "$1/dev" 2>/dev/null
	umount "$1/proc" 2>/dev/null
	return 0
}

# pg_root_make MAJOR: make the root for MAJOR unless it is there; prints its
# directory. Made in a temporary directory and renamed when complete, so an
# interrupted bootstrap is not taken for a root.
pg_root_make() {
	local major=$1 release mirror dir tmp
	release=$(pg_root_release "$major") || { echo "no Debian release packages PostgreSQL $major here" >&2; return 1; }
	dir=$PQRUN_PG_ROOTS/$major
	if [ ! -e "$dir/.pqrun-root" ]; then
		[ "$(id -u)" = 0 ] || { echo "making the PostgreSQL $major root needs root" >&2; return 1; }
		command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } || return 1
		mirror=$(pg_root_mirror) || { echo "no Debian mirror in the machine's apt sources" >&2; return 1; }
		mkdir -p "$PQRUN_PG_ROOTS"
		tmp=$(mktemp -d "$PQRUN_PG_ROOTS/.$major.XXXXXX") && chmod 755 "$tmp"
		echo "== making a Debian $release root for PostgreSQL $major in $dir" >&2
		debootstrap --variant=minbase "$release" "$tmp" "$mirror" >"$tmp.log" 2>&1 ||
			{ tail -n 20 "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; return 1; }
		rm -f "$tmp.log"
		echo "deb $mirror $release main" >"$tmp/etc/apt/sources.list"
		cp /etc/apt/apt.conf.d/* "$tmp/etc/apt/apt.conf.d/" 2>/dev/null
		# The Debian postgresql package would create and start a cluster on 5432.
		mkdir -p "$tmp/etc/postgresql-common"
		echo 'create_main_cluster = false' >"$tmp/etc/postgresql-common/createcluster.conf"
		touch "$tmp/.pqrun-root"
		pg_root_umount "$dir"
		# Never remove a directory that still has /dev bound inside it.
		grep -q " $dir/" /proc/mounts && { echo "$dir has mounts inside; not replacing it" >&2; return 1; }
		rm -rf "$dir" && mv "$tmp" "$dir" || return 1
	fi
	# The machine's name service and its own certificate authorities (a
	# proxy's, which npm's registry answers through), as the machine has them.
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null
	if [ -d /usr/local/share/ca-certificates ]; then
		mkdir -p "$dir/usr/local/share/ca-certificates"
		cp -r /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/"
	fi
	echo "$dir"
}

# pg_root_run MAJOR REPO CMD: run CMD (a bash command line) as root inside
# MAJOR's root, in a fresh copy of REPO's sources at /src/pqrun (and of
# ../shared/vendor at /src/shared/vendor), with PQRUN_PG_MAJOR=MAJOR. Build output of the checkout is not copied: it was
# built against another version.
pg_root_run() {
	local major=$1 repo=$2 cmd=$3 dir status
	dir=$(pg_root_make "$major") || return 1
	rm -rf "$dir/src/pqrun" && mkdir -p "$dir/src/pqrun" || return 1
	(cd "$repo" && tar -c --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		--exclude=regression.diffs --exclude=isolation.diffs --exclude=results --exclude=node_modules .) |
		tar -x -C "$dir/src/pqrun" || return 1
	# Vendored sources the tests build (test/lib/citus.sh), where they are
	# beside the repository.
	rm -rf "$dir/src/shared" && mkdir -p "$dir/src/shared"
	[ -d "$repo/../shared/vendor" ] && cp -r "$repo/../shared/vendor" "$dir/src/shared/"
	pg_root_mount "$dir"
	# update-ca-certificates adds the machine's authorities once the root has
	# ca-certificates (test/lib/install_deps.sh installs it); Node.js reads
	# them from NODE_EXTRA_CA_CERTS.
	chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 PQRUN_PG_MAJOR="$major" NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
		/bin/bash -c "cd /src/pqrun && bash test/lib/install_deps.sh && update-ca-certificates >/dev/null && $cmd"
	status=$?
	pg_root_umount "$dir"
	return $status
}
