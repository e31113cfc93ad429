#!/usr/bin/env bash
# Builds the boot files of the bare-metal lab (docs/metal-drivers.md): Debian's kernel as a bzImage
# (vmlinuz, what iPXE boots over the network) and a small busybox initramfs whose /init prints a
# marker line with the kernel command line on the serial console, then runs a shell. The guest
# suites PXE-boot QEMU machines with them.
#
# The result lands in ${BETTER_COMPUTE_METAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/metal}/<key>,
# <key> derived from this file, built in a temporary directory beside it and renamed into place
# only when complete; with the files present it prints the directory and exits 0 at once.
#
# Usage: scripts/build-metal-lab.sh [--print-dir]
# Needs: apt-get (the kernel package comes from the host's Debian archive), dpkg-deb, gzip and a
# static busybox (busybox-static). Prints the directory on stdout as its last line.
set -euo pipefail

script_path=$(readlink -f "$0")
readonly script_path
cache_root=${BETTER_COMPUTE_METAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/metal}
readonly cache_root
build_key=$(sha256sum "$script_path" | cut -c1-16)
readonly build_key
readonly lab_dir="$cache_root/$build_key"

log() { printf 'build-metal-lab: %s\n' "$*" >&2; }
fail() {
	printf 'build-metal-lab: error: %s\n' "$1" >&2
	[ -n "${2:-}" ] && printf 'build-metal-lab: hint: %s\n' "$2" >&2
	exit 1
}

if [ "${1:-}" = "--print-dir" ]; then
	printf '%s\n' "$lab_dir"
	exit 0
fi
[ $# -eq 0 ] || fail "unknown argument: $1" "run with no argument, or --print-dir"
if [ -f "$lab_dir/manifest.json" ]; then
	printf '%s\n' "$lab_dir"
	exit 0
fi

for tool in apt-get apt-cache dpkg-deb gzip sha256sum flock; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed" "this build needs a Debian host"
done
busybox=$(command -v busybox || true)
[ -n "$busybox" ] && file_kind=$(od -An -c -N4 "$busybox" | tr -d ' ') || file_kind=
[ "$file_kind" = '177ELF' ] || fail "busybox is not installed" "apt-get install -y busybox-static"
if ldd "$busybox" >/dev/null 2>&1; then
	fail "$busybox is linked dynamically; the initramfs needs a static one" "apt-get install -y busybox-static"
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [ -f "$lab_dir/manifest.json" ]; then
	printf '%s\n' "$lab_dir"
	exit 0
fi

work=$(mktemp -d "$cache_root/.build-$build_key.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
out="$work/out"
mkdir -p "$out"

package=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
if [ -z "$package" ]; then
	log "no linux-image-amd64 in the package lists; running apt-get update"
	apt-get update -qq >&2 || fail "apt-get update failed"
	package=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
fi
[ -n "$package" ] || fail "no Debian kernel package found" "check the host's apt sources"
log "downloading $package"
(cd "$work" && apt-get download -qq "$package" 2>"$work/apt.log") || {
	apt-get update -qq >&2 || true
	(cd "$work" && apt-get download -qq "$package" 2>"$work/apt.log")
} || { cat "$work/apt.log" >&2; fail "downloading $package failed"; }
mkdir -p "$work/kernel"
dpkg-deb --fsys-tarfile "$work"/"$package"_*.deb | tar -x -C "$work/kernel" ./boot
kernel_version=${package#linux-image-}
cp "$work/kernel/boot/vmlinuz-$kernel_version" "$out/vmlinuz"

log "building the initramfs"
initrd="$work/initrd"
mkdir -p "$initrd"/{bin,dev,proc,sys}
cp "$busybox" "$initrd/bin/busybox"
cat >"$initrd/init" <<'EOF'
#!/bin/busybox sh
# The metal lab's machine: says it booted, with its command line (which carries the test's marker).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo
echo "=== metal-lab: $(uname -r) booted over PXE; cmdline: $(cat /proc/cmdline) ==="
exec setsid cttyhack sh
EOF
chmod 0755 "$initrd/init"
(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -9n >"$out/initrd.gz"

{
	printf '{\n  "buildKey": "%s",\n  "kernelPackage": "%s",\n  "kernelVersion": "%s",\n' "$build_key" "$package" "$kernel_version"
	printf '  "vmlinuzSha256": "%s",\n' "$(sha256sum "$out/vmlinuz" | cut -d' ' -f1)"
	printf '  "initrdSha256": "%s"\n}\n' "$(sha256sum "$out/initrd.gz" | cut -d' ' -f1)"
} >"$out/manifest.json"
mv -T "$out" "$lab_dir"
log "built $lab_dir"
printf '%s\n' "$lab_dir"
