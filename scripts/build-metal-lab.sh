#!/usr/bin/env bash
# Builds the boot files of the bare-metal lab (docs/metal-drivers.md): the deploy ramdisk's kernel
# (scripts/build-deploy-ramdisk.sh builds it from Debian's package: vmlinuz, what iPXE boots over
# the network) and a small busybox initramfs whose /init prints a marker line with the kernel
# command line on the serial console, then runs a shell. The guest suites PXE-boot QEMU machines
# with them.
#
# The result lands in ${BETTER_COMPUTE_METAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/metal}/<key>,
# <key> derived from this file and the ramdisk's build, built in a temporary directory beside it
# and renamed into place only when complete; with the files present it prints the directory and
# exits 0 at once.
#
# Usage: scripts/build-metal-lab.sh [--print-dir]
# Needs: what build-deploy-ramdisk.sh needs, and gzip and a static busybox (busybox-static). Prints
# the directory on stdout as its last line.
set -euo pipefail

script_path=$(readlink -f "$0")
readonly script_path
cache_root=${BETTER_COMPUTE_METAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/metal}
ramdisk_script="$(dirname "$script_path")/build-deploy-ramdisk.sh"
library="$(dirname "$script_path")/lib/cached-build.sh"
# The ramdisk's directory names its own build key, so a new kernel recipe builds a new lab too.
build_key=$({ cat "$script_path" "$library"; "$ramdisk_script" --print-dir; } | sha256sum | cut -c1-16)
build_dir="$cache_root/$build_key"
build_name=build-metal-lab
# shellcheck source=SCRIPTDIR/lib/cached-build.sh
. "$library"

if [ "${1:-}" = "--print-dir" ]; then
	printf '%s\n' "$build_dir"
	exit 0
fi
[ $# -eq 0 ] || fail "unknown argument: $1" "run with no argument, or --print-dir"
done_if_built
need_tools gzip sha256sum flock
static_busybox
enter_cache

ramdisk_dir=$("$ramdisk_script") || fail "building the deploy ramdisk (its kernel) failed"
cp "$ramdisk_dir/vmlinuz" "$out/vmlinuz"
package=$(sed -n 's/^ *"kernelPackage": "\(.*\)",$/\1/p' "$ramdisk_dir/manifest.json")
kernel_version=$(sed -n 's/^ *"kernelVersion": "\(.*\)",$/\1/p' "$ramdisk_dir/manifest.json")

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
finish_build
