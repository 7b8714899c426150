# shellcheck shell=bash
# bench/lib/pgtree.sh — a private PostgreSQL tree for the benchmark cluster.
#
# PostgreSQL finds its lib and share directories relative to the real path of
# its executable, so a copy of the server binaries in DIR/usr/lib/postgresql/NN/bin
# runs with DIR/usr/lib/postgresql/NN/lib as $libdir. private_pg_tree fills
# DIR with copies of the three server binaries, symbolic links to everything
# else of the system installation, and pqrun's files installed by the
# repository's Makefile (make install DESTDIR=DIR). The benchmark cluster
# thus runs exactly the build made at its start, even when someone reinstalls
# pqrun system-wide meanwhile (a background worker forked after such a
# reinstall would load the new pqrun.so next to the preloaded old one).

# private_pg_tree DIR [SRCDIR]: build the tree with the pqrun built in SRCDIR
# (default: the current directory); prints the bin directory to use.
private_pg_tree() {
	local dest=$1 src=${2:-.} bindir libdir sharedir f
	bindir=$(pg_config --bindir)
	libdir=$(pg_config --pkglibdir)
	sharedir=$(pg_config --sharedir)
	mkdir -p "$dest$bindir" "$dest$libdir" "$dest$sharedir/extension"
	make -s -C "$src" install DESTDIR="$dest" >/dev/null
	for f in postgres pg_ctl initdb; do cp "$bindir/$f" "$dest$bindir/$f"; done
	for f in "$libdir"/* "$sharedir"/* "$sharedir"/extension/*; do
		[ -e "$dest$f" ] || [ -L "$dest$f" ] || ln -s "$f" "$dest$f"
	done
	chmod -R a+rX "$dest"
	echo "$dest$bindir"
}
