# shellcheck shell=bash disable=SC2154 # the sourcing script sets build_name, cache_root, build_dir and build_key
# What the cached builds of the deploy ramdisk and the metal lab share, sourced by both: messages,
# the tools they need, a static busybox, and entering the cache (one builder at a time; a second
# one waits, then finds the finished result and prints it). The sourcing script sets, first:
#   build_name  its name, for messages
#   cache_root  the cache it builds in
#   build_dir   the finished result's directory (holding manifest.json once whole)
#   build_key   the key in that directory's name
# Its own build key must cover this file too.

log() { printf '%s: %s\n' "$build_name" "$*" >&2; }
fail() {
	printf '%s: error: %s\n' "$build_name" "$1" >&2
	[ -n "${2:-}" ] && printf '%s: hint: %s\n' "$build_name" "$2" >&2
	exit 1
}

# Prints the result and exits when it is built already.
done_if_built() {
	if [ -f "$build_dir/manifest.json" ]; then
		printf '%s\n' "$build_dir"
		exit 0
	fi
}

need_tools() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed" "this build needs a Debian host"
	done
}

# Sets busybox to a statically linked busybox, the only kind an initramfs can hold alone.
static_busybox() {
	local file_kind=
	busybox=$(command -v busybox || true)
	[ -n "$busybox" ] && file_kind=$(od -An -c -N4 "$busybox" | tr -d ' ')
	[ "$file_kind" = '177ELF' ] || fail "busybox is not installed" "apt-get install -y busybox-static"
	if ldd "$busybox" >/dev/null 2>&1; then
		fail "$busybox is linked dynamically; the initramfs needs a static one" "apt-get install -y busybox-static"
	fi
}

# Takes the cache's lock and makes work (removed on exit) and out (renamed into place when whole).
enter_cache() {
	mkdir -p "$cache_root"
	exec 9>"$cache_root/.lock"
	flock 9
	done_if_built
	work=$(mktemp -d "$cache_root/.build-$build_key.XXXXXX")
	# shellcheck disable=SC2064 # the directory is known now
	trap "rm -rf '$work'" EXIT
	trap 'exit 1' INT TERM HUP
	out="$work/out"
	mkdir -p "$out"
}

# Moves the finished result into place and prints it.
finish_build() {
	mv -T "$out" "$build_dir"
	log "built $build_dir"
	printf '%s\n' "$build_dir"
}
