#!/usr/bin/env bash
# test/lib/install_deps.sh — installs what building, running and testing
# pqrun needs on a Debian machine (as root), and nothing when it is there.
#
# The Debian postgresql package creates and starts a default cluster; pqrun
# never uses it (it starts clusters of its own), so it is stopped again to
# keep port 5432 and the memory free.
set -euo pipefail

packages=(postgresql-15 postgresql-server-dev-15 postgresql-client-15 postgresql-15-pgtap
	libtap-parser-sourcehandler-pgtap-perl g++ make
	postgresql-15-cron postgresql-15-pgaudit pgbouncer python3-psycopg nodejs)
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
