#!/usr/bin/env bash
# Builds the deploy ramdisk a site agent boots machines into (bcd run --ramdisk-dir; docs/metal.md):
# Debian's kernel as a bzImage (vmlinuz, what iPXE boots over the network) and a busybox initramfs
# holding the drivers of common network cards and disks and the deploy agent
# (scripts/deploy-agent.sh) as its /init.
#
# The result lands in ${BETTER_COMPUTE_RAMDISK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/ramdisk}/<key>,
# <key> derived from this file and the agent's, built in a temporary directory beside it and renamed
# into place only when complete; with the files present it prints the directory and exits 0 at once.
#
# Usage: scripts/build-deploy-ramdisk.sh [--print-dir]
# Needs: apt-get (the kernel package comes from the host's Debian archive), dpkg-deb, gzip and a
# static busybox (busybox-static). Prints the directory on stdout as its last line.
set -euo pipefail

script_path=$(readlink -f "$0")
readonly script_path
agent_path="$(dirname "$script_path")/deploy-agent.sh"
readonly agent_path
# The drivers the agent loads: virtual machines' and common servers' network cards and disks, and
# the firmware tables it reads the memory from.
readonly ramdisk_modules="virtio_pci virtio_net virtio_blk e1000 e1000e igb ixgbe ahci sd_mod nvme dmi_sysfs"
cache_root=${BETTER_COMPUTE_RAMDISK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/ramdisk}
library="$(dirname "$script_path")/lib/cached-build.sh"
build_key=$(cat "$script_path" "$agent_path" "$library" | sha256sum | cut -c1-16)
build_dir="$cache_root/$build_key"
build_name=build-deploy-ramdisk
# shellcheck source=SCRIPTDIR/lib/cached-build.sh
. "$library"

if [ "${1:-}" = "--print-dir" ]; then
	printf '%s\n' "$build_dir"
	exit 0
fi
[ $# -eq 0 ] || fail "unknown argument: $1" "run with no argument, or --print-dir"
done_if_built
need_tools apt-get apt-cache dpkg-deb gzip sha256sum flock
static_busybox
enter_cache

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
dpkg-deb -x "$work"/"$package"_*.deb "$work/kernel"
kernel_version=${package#linux-image-}
modules="$work/kernel/lib/modules/$kernel_version"
[ -d "$modules" ] || fail "the kernel package holds no modules for $kernel_version"
cp "$work/kernel/boot/vmlinuz-$kernel_version" "$out/vmlinuz"

log "building the initramfs"
initrd="$work/initrd"
mkdir -p "$initrd"/{bin,dev,proc,sys,etc,tmp} "$initrd/lib/modules/$kernel_version"
cp "$busybox" "$initrd/bin/busybox"
# Module names use _ where some file names use - (dmi_sysfs is dmi-sysfs.ko).
module_path() { find "$modules" -name "$(printf '%s' "$1" | sed 's/[-_]/[-_]/g').ko*" | head -1; }
# Each wanted module's dependencies come from its own modinfo, so the list above names only the
# drivers and the kernel package decides what they pull in. One built into the kernel is skipped.
queue="$ramdisk_modules"
seen=" "
load_order=""
while [ -n "${queue// /}" ]; do
	# shellcheck disable=SC2086 # a space-separated list of module names
	set -- $queue
	name=$1
	shift
	queue="$*"
	case "$seen" in *" $name "*) continue ;; esac
	seen="$seen$name "
	path=$(module_path "$name")
	if [ -z "$path" ]; then
		grep -q "/$(printf '%s' "$name" | sed 's/[-_]/[-_]/g').ko" "$modules/modules.builtin" 2>/dev/null ||
			fail "module $name is neither built into linux-image-$kernel_version nor one of its modules"
		continue
	fi
	relative=${path#"$modules/"}
	mkdir -p "$initrd/lib/modules/$kernel_version/$(dirname "$relative")"
	cp "$path" "$initrd/lib/modules/$kernel_version/$relative"
	# The .modinfo section holds NUL-separated key=value strings, depends= among them.
	depends=$(tr '\0' '\n' <"$path" | sed -n 's/^depends=//p' | head -1 | tr ',' ' ')
	queue="$queue $depends"
	load_order="$depends $load_order $name"
done
cp "$modules"/modules.{order,builtin} "$initrd/lib/modules/$kernel_version/" 2>/dev/null || true
"$busybox" depmod -b "$initrd" "$kernel_version"
# shellcheck disable=SC2086 # one module name a line; modprobe loads what each depends on first
printf '%s\n' $load_order | awk 'NF && !seen[$0]++' >"$initrd/etc/modules"
cp "$agent_path" "$initrd/init"
chmod 0755 "$initrd/init"
(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -9n >"$out/initrd.gz"

{
	printf '{\n  "buildKey": "%s",\n  "kernelPackage": "%s",\n  "kernelVersion": "%s",\n' "$build_key" "$package" "$kernel_version"
	printf '  "vmlinuzSha256": "%s",\n' "$(sha256sum "$out/vmlinuz" | cut -d' ' -f1)"
	printf '  "initrdSha256": "%s"\n}\n' "$(sha256sum "$out/initrd.gz" | cut -d' ' -f1)"
} >"$out/manifest.json"
finish_build
