#!/usr/bin/env bash
# test/lib/install_deps.sh — installs what building, running and testing
# pqrun needs on a Debian machine (as root), and nothing when it is there.
#
# The Debian postgresql package creates and starts a default cluster; pqrun
# never uses it (it starts clusters of its own), so it is stopped again to
# keep port 5432 and the memory free.
#
# PQRUN_PG_MAJOR chooses the PostgreSQL version (set inside the roots of
# test/lib/pg_root.sh); by default, the one the machine's Debian packages.
set -euo pipefail

major=${PQRUN_PG_MAJOR:-$(source "$(dirname "$0")/pg_root.sh" && pg_root_host_major)}
packages=(postgresql-$major postgresql-server-dev-$major postgresql-client-$major postgresql-$major-pgtap
	libtap-parser-sourcehandler-pgtap-perl g++ make ca-certificates
	postgresql-$major-cron postgresql-$major-pgaudit pgbouncer python3-psycopg nodejs)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs from other sources carries npm; Debian's does not.
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} = 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "missing packages: ${missing[*]} (run as root to install them)" >&2
	exit 1
fi
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Keep the package from creating a default cluster we would not use.
mkdir -p /etc/postgresql-common
grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf ||
	echo 'create_main_cluster = false' >>/etc/postgresql-common/createcluster.conf
apt-get install -y -qq --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
