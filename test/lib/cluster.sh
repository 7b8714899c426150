# test/lib/cluster.sh — start and stop a throwaway PostgreSQL cluster.
#
# Sourced by the setup script, the test runner and the benchmark. The
# cluster runs as the `postgres` OS user when we are root (PostgreSQL refuses
# to run as root), listens only on a Unix socket in its own directory plus
# loopback, and preloads pqrun.

PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}

# as_pg CMD...: run a command as the cluster's OS user, from / when that
# user cannot enter the current directory (a checkout in /root): PostgreSQL's
# programs complain about it otherwise. Paths given must then be absolute.
as_pg() {
	if [ "$(id -u)" = 0 ] && runuser -u postgres -- test -x "$PWD" 2>/dev/null; then
		runuser -u postgres -- "$@"
	elif [ "$(id -u)" = 0 ]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# cluster_init DIR PORT [EXTRA_CONF_FILE]: create a cluster in DIR/data.
cluster_init() {
	local dir=$1 port=$2 extra=${3:-}
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	as_pg "$PG_BINDIR/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log"; return 1; }
	{
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "listen_addresses = '127.0.0.1'"
		echo "shared_preload_libraries = 'pqrun'"
		echo "logging_collector = off"
		# %b: a background worker's lines name it (%q ends the prefix of
		# processes without a session there).
		echo "log_line_prefix = '%m [%p] %b %q%a '"
		if [ -n "$extra" ]; then cat "$extra"; fi
	} | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
}

# cluster_start DIR: start the cluster and wait until it accepts connections.
cluster_start() {
	local dir=$1
	as_pg "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
		{ tail -n 30 "$dir/server.log"; return 1; }
}

# cluster_stop DIR [MODE]: stop it (fast by default).
cluster_stop() {
	local dir=$1 mode=${2:-fast}
	as_pg "$PG_BINDIR/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null 2>&1 || true
}
