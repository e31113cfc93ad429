#!/bin/sh
# Makes a stand-in for docker.io/library/node:20-bookworm-slim on a machine that reaches no
# container registry: a Debian bookworm minbase root file system (debootstrap) with this machine's
# own Node.js binary and npm under /usr/local, as a tar that `podman import` turns into a base image
# for deploy/Containerfile (`--build-arg BASE=...`). The image test (test/guest/deploy-image.test.ts)
# uses it; a real build uses the official image.
#
# The tar lands in ${BETTER_COMPUTE_IMAGE_BASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/image-base}/<key>/rootfs.tar,
# where <key> covers this script and the Node.js and npm versions, so a new recipe or a new Node
# builds beside the old one. It is built in a temporary directory and renamed into place when whole;
# a second run finds it and prints its path at once.
#
# This machine's extra certificate authorities (NODE_EXTRA_CA_CERTS, when set: a TLS-inspecting
# egress proxy's) go into the root file system too, so npm inside a build through that proxy works;
# the official image has no such file and needs none.
#
# Usage: scripts/build-node-base.sh [--print-path | --import NAME]
#   --print-path   print the tar's path the current recipe builds, and exit
#   --import NAME  also `podman import` the tar as the image NAME (with node's environment and
#                  command), unless an image of that name exists; prints NAME instead of the path
# Environment:
#   BETTER_COMPUTE_IMAGE_BASE_CACHE  the cache root (default above)
#   BETTER_COMPUTE_GUEST_MIRROR      the Debian mirror (default http://deb.debian.org/debian)
# Prints the tar's path on stdout as its last line; progress goes to stderr.
set -eu

suite=bookworm
arch=amd64

log() { printf 'build-node-base: %s\n' "$*" >&2; }
fail() {
	printf 'build-node-base: error: %s\n' "$1" >&2
	[ -z "${2:-}" ] || printf 'build-node-base: hint: %s\n' "$2" >&2
	exit 1
}

script_path=$(readlink -f "$0")
cache_root=${BETTER_COMPUTE_IMAGE_BASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/image-base}
mirror=${BETTER_COMPUTE_GUEST_MIRROR:-http://deb.debian.org/debian}

node_bin=$(command -v node) || fail "node is not on PATH" "install Node.js 20 (the image's runtime is this machine's node)"
node_bin=$(readlink -f "$node_bin")
node_version=$("$node_bin" --version)
case "$node_version" in
v20.*) ;;
*) fail "node is $node_version, not 20.x" "the stand-in mirrors node:20-bookworm-slim; put Node.js 20 first on PATH" ;;
esac
npm_dir=$(dirname "$node_bin")/../lib/node_modules/npm
[ -f "$npm_dir/bin/npm-cli.js" ] || fail "no npm beside $node_bin (looked in $npm_dir)"
npm_dir=$(readlink -f "$npm_dir")
npm_version=$("$node_bin" "$npm_dir/bin/npm-cli.js" --version)

extra_ca=${NODE_EXTRA_CA_CERTS:-}
[ -z "$extra_ca" ] || [ -f "$extra_ca" ] || fail "NODE_EXTRA_CA_CERTS is $extra_ca, which is not a file"

key=$({
	cat "$script_path"
	printf '%s %s %s %s\n' "$suite" "$arch" "$node_version" "$npm_version"
	[ -z "$extra_ca" ] || cat "$extra_ca"
} | sha256sum | cut -c1-16)
out_dir="$cache_root/$key"
tarball="$out_dir/rootfs.tar"

image=''
case "${1:-}" in
--print-path)
	printf '%s\n' "$tarball"
	exit 0
	;;
--import)
	[ $# -eq 2 ] || fail "--import needs an image name" "such as --import localhost/node-base:$key"
	image=$2
	;;
'') ;;
*) fail "unknown argument: $1" "run with no argument, --print-path or --import NAME" ;;
esac

# Imports the tar as $image unless it is there; prints what the run made.
finish() {
	if [ -z "$image" ]; then
		printf '%s\n' "$tarball"
		exit 0
	fi
	command -v podman >/dev/null 2>&1 || fail "podman is not installed" "apt-get install -y podman"
	if ! podman image exists "$image"; then
		log "importing $tarball as $image"
		set -- --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'CMD ["node"]'
		[ ! -f "$out_dir/extra-ca" ] ||
			set -- "$@" --change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/build-host-extra.crt'
		podman import "$@" "$tarball" "$image" >/dev/null
	fi
	printf '%s\n' "$image"
	exit 0
}
[ ! -f "$tarball" ] || finish

[ "$(id -u)" -eq 0 ] || fail "debootstrap needs root" "run it once as root: sudo $script_path"
for tool in debootstrap tar sha256sum flock; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed" "apt-get install -y debootstrap tar coreutils util-linux"
done

mkdir -p "$cache_root/debs"
# One builder at a time per cache: a second one waits, then finds the finished tar.
exec 9>"$cache_root/.lock"
flock 9
[ ! -f "$tarball" ] || finish

work=$(mktemp -d "$cache_root/.build-$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP
root="$work/root"
started=$(date +%s)

log "debootstrap $suite minbase from $mirror"
debootstrap --variant=minbase --arch="$arch" --cache-dir="$cache_root/debs" \
	"$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{
		tail -20 "$work/debootstrap.log" >&2
		fail "debootstrap failed" "check that $mirror is reachable"
	}

log "adding node $node_version and npm $npm_version under /usr/local"
mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/node_modules"
cp "$node_bin" "$root/usr/local/bin/node"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
if [ -n "$extra_ca" ]; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp "$extra_ca" "$root/usr/local/share/ca-certificates/build-host-extra.crt"
fi
# The official image's user.
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
chroot "$root" /usr/local/bin/node --version >/dev/null || fail "node does not run in the new root"

# What bookworm-slim leaves out: documentation, manuals, locales, apt's lists and downloads.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* \
	"$root"/var/cache/debconf/*-old "$root"/var/log/* "$root"/tmp/*

mkdir -p "$work/out"
tar --numeric-owner --xattrs -C "$root" -cf "$work/out/rootfs.tar" .
printf '%s\n' "$node_version" >"$work/out/node-version"
[ -z "$extra_ca" ] || : >"$work/out/extra-ca"
rm -rf "$out_dir"
mv "$work/out" "$out_dir"
log "done in $(($(date +%s) - started)) s: $(du -h "$tarball" | cut -f1) at $tarball"
finish
