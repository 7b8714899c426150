# test/lib/need_packages.sh — need_packages PKG...: install the Debian
# packages among PKG that are not installed (as root), and nothing when all
# are. Sourced by the suites of test/packages/, which need tools the
# extension's own suites do not (Chromium, Prometheus, dpkg-dev, lintian...).
need_packages() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	[ "$(id -u)" = 0 ] || { echo "missing packages: ${missing[*]} (run as root to install them)" >&2; return 1; }
	# On stderr: callers print paths on stdout that others capture.
	echo "installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}
