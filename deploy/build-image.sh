#!/bin/sh
# Builds the better-compute server image from deploy/Containerfile, with podman when it is
# installed, else docker. The build context is the repository's root (.dockerignore keeps it to the
# sources the build stage copies).
#
# Usage: deploy/build-image.sh [--tag NAME] [OPTION...]
#   --tag NAME  the image's name (default better-compute:VERSION, VERSION from the server's
#               package.json); the image is also tagged NAME's repository :latest
#   OPTION...   passed to `podman build` or `docker build` as they are, such as
#               --build-arg BASE=IMAGE or --network host
# Environment:
#   CONTAINER_ENGINE  podman or docker, to choose when both are installed
# Prints the image's name on stdout as its last line; the engine's progress goes to stderr.
set -eu

log() { printf 'build-image: %s\n' "$*" >&2; }
fail() {
	printf 'build-image: error: %s\n' "$1" >&2
	[ -z "${2:-}" ] || printf 'build-image: hint: %s\n' "$2" >&2
	exit 1
}

repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' "$repo/packages/better-compute/package.json")
[ -n "$version" ] || fail "no version in packages/better-compute/package.json"

tag="better-compute:$version"
if [ "${1:-}" = "--tag" ]; then
	[ $# -ge 2 ] || fail "--tag needs a name" "pass --tag NAME, such as --tag registry.example.com/better-compute:1.0"
	tag=$2
	shift 2
fi
case "$tag" in
*:*) latest="${tag%:*}:latest" ;;
*) latest="$tag:latest" ;;
esac

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
	if command -v podman >/dev/null 2>&1; then
		engine=podman
	elif command -v docker >/dev/null 2>&1; then
		engine=docker
	else
		fail "neither podman nor docker is installed" "apt-get install -y podman (or install Docker), then run this again"
	fi
fi
case "$engine" in
podman)
	# The OCI image format has no HEALTHCHECK; the Docker format keeps it.
	set -- --format docker "$@"
	;;
docker)
	# The Containerfile's cache mount needs BuildKit (the default since Docker 23).
	DOCKER_BUILDKIT=1
	export DOCKER_BUILDKIT
	;;
*) fail "CONTAINER_ENGINE is $engine, not podman or docker" ;;
esac
command -v "$engine" >/dev/null 2>&1 || fail "$engine is not installed"

log "building $tag with $engine"
started=$(date +%s)
"$engine" build --file "$repo/deploy/Containerfile" --tag "$tag" --tag "$latest" "$@" "$repo" >&2
size=$("$engine" image inspect --format '{{.Size}}' "$tag")
log "built $tag in $(($(date +%s) - started)) s ($((size / 1000000)) MB)"
printf '%s\n' "$tag"
