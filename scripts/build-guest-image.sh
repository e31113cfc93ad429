#!/usr/bin/env bash
# Builds the Debian bookworm guest that VPS instances boot: an uncompressed PVH kernel (vmlinux), a
# small busybox initramfs that loads the virtio drivers, and an ext4 root disk (qcow2) holding
# openssh-server, the QEMU guest agent (how the node gives a sandbox its identity) and a small
# first-boot agent that reads a NoCloud seed.
#
# The result lands in ${BETTER_COMPUTE_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/guest}/<key>,
# where <key> is derived from this file, so editing the recipe builds a new image beside the old one.
# A build happens in a temporary directory beside it and is renamed into place only when complete; a
# second run with the image present prints its directory and exits 0 at once.
#
# Usage: scripts/build-guest-image.sh [--print-dir]
#   --print-dir   print the image directory the current recipe builds into, and exit
# Environment:
#   BETTER_COMPUTE_GUEST_CACHE   the cache root (default above)
#   BETTER_COMPUTE_GUEST_MIRROR  the Debian mirror (default http://deb.debian.org/debian)
# Prints the image directory on stdout as its last line; progress goes to stderr.
set -euo pipefail

readonly suite=bookworm
readonly arch=amd64
readonly default_user=debian
readonly root_disk_size=2G
# Drivers the guest needs before its root file system is mounted or to take part in the VM's life:
# disk (ext4 checksums its metadata with crc32c), network, the seed volume's file systems, the ACPI
# power button, the virtio RNG and the virtio serial port the QEMU guest agent talks over.
readonly initrd_modules="crc32c_generic virtio_pci virtio_blk virtio_net ext4 isofs vfat nls_cp437 nls_ascii button evdev virtio_rng virtio_console"
readonly kernel_cmdline="console=ttyS0 root=/dev/vda rw panic=-1 quiet"

script_path=$(readlink -f "$0")
readonly script_path
cache_root=${BETTER_COMPUTE_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/better-compute/guest}
readonly cache_root
mirror=${BETTER_COMPUTE_GUEST_MIRROR:-http://deb.debian.org/debian}
readonly mirror
guest_files="$(dirname "$script_path")/guest"
readonly guest_files
# The key covers this recipe and the files it copies into the guest.
build_key=$( { cat "$script_path" "$guest_files"/*.sh; printf '%s %s\n' "$suite" "$arch"; } | sha256sum | cut -c1-16)
readonly build_key
readonly image_dir="$cache_root/$build_key"

log() { printf 'build-guest-image: %s\n' "$*" >&2; }
fail() {
	printf 'build-guest-image: error: %s\n' "$1" >&2
	[ -n "${2:-}" ] && printf 'build-guest-image: hint: %s\n' "$2" >&2
	exit 1
}

if [ "${1:-}" = "--print-dir" ]; then
	printf '%s\n' "$image_dir"
	exit 0
fi
[ $# -eq 0 ] || fail "unknown argument: $1" "run with no argument, or --print-dir"

if [ -f "$image_dir/manifest.json" ]; then
	printf '%s\n' "$image_dir"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "building the guest image needs root (debootstrap and chroot)" \
	"run it once as root: sudo $script_path"
for tool in debootstrap mkfs.ext4 qemu-img xz sha256sum flock; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed" \
		"apt-get install -y debootstrap e2fsprogs qemu-utils xz-utils coreutils util-linux"
done

mkdir -p "$cache_root"
# One builder at a time per cache: a second one waits, then finds the finished image.
exec 9>"$cache_root/.lock"
flock 9
if [ -f "$image_dir/manifest.json" ]; then
	printf '%s\n' "$image_dir"
	exit 0
fi

work=$(mktemp -d "$cache_root/.build-$build_key.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

root="$work/root"
out="$work/out"
mkdir -p "$out" "$cache_root/debs"
started=$(date +%s)

log "debootstrap $suite (minbase + openssh-server, qemu-guest-agent, iproute2, curl) from $mirror"
debootstrap --variant=minbase --arch="$arch" --include=openssh-server,qemu-guest-agent,iproute2,curl,ca-certificates \
	--cache-dir="$cache_root/debs" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{ tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed" "check that $mirror is reachable"; }

log "fetching the kernel and busybox-static packages"
# shellcheck disable=SC2016 # expanded by the chroot's shell
chroot "$root" sh -c 'apt-get update -qq && cd /tmp &&
	apt-get download -qq busybox-static \
		"$(apt-cache depends linux-image-amd64 | sed -n "s/^ *Depends: \(linux-image-[0-9].*\)$/\1/p" | head -1)"' \
	>"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "downloading the kernel failed"; }
mkdir -p "$work/kernel" "$work/busybox"
dpkg-deb -x "$root"/tmp/linux-image-*.deb "$work/kernel"
dpkg-deb -x "$root"/tmp/busybox-static_*.deb "$work/busybox"
busybox="$work/busybox/bin/busybox"
kernel_version=$(basename "$(find "$work/kernel/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -1)")
[ -n "$kernel_version" ] || fail "the kernel package holds no modules directory"

log "extracting the uncompressed vmlinux from vmlinuz-$kernel_version"
vmlinuz="$work/kernel/boot/vmlinuz-$kernel_version"
# The bzImage carries the ELF kernel as one compressed stream after its setup code; find the first
# stream of a known format and decompress only that stream (what the kernel's extract-vmlinux does).
extract_vmlinux() {
	local magic decompressor offset
	while read -r magic decompressor; do
		offset=$(LC_ALL=C grep -obUaP "$magic" "$vmlinuz" | head -1 | cut -d: -f1) || true
		[ -n "$offset" ] || continue
		tail -c +"$((offset + 1))" "$vmlinuz" | $decompressor >"$out/vmlinux" 2>/dev/null || true
		[ "$(head -c 4 "$out/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
	done <<-'EOF'
		\xfd7zXZ\x00 xz -dc --single-stream
		\x28\xb5\x2f\xfd zstd -dcq
		\x1f\x8b\x08 gzip -dc
	EOF
	return 1
}
extract_vmlinux || fail "no ELF kernel found inside $vmlinuz"

log "building the initramfs"
initrd="$work/initrd"
mkdir -p "$initrd"/{bin,dev,proc,sys,newroot,etc} "$initrd/lib/modules/$kernel_version"
cp "$busybox" "$initrd/bin/busybox"
# Module names use _ where some file names use - (virtio_rng is virtio-rng.ko).
module_path() { find "$work/kernel/lib/modules/$kernel_version" -name "$(printf '%s' "$1" | sed 's/[-_]/[-_]/g').ko*" | head -1; }
# Resolve each wanted module's dependencies from its own modinfo, so the list above names only the
# modules the guest needs and the kernel package decides what they pull in.
queue="$initrd_modules"
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
	[ -n "$path" ] || fail "module $name is missing from linux-image-$kernel_version"
	relative=${path#"$work/kernel/lib/modules/$kernel_version/"}
	mkdir -p "$initrd/lib/modules/$kernel_version/$(dirname "$relative")"
	cp "$path" "$initrd/lib/modules/$kernel_version/$relative"
	# The .modinfo section holds NUL-separated key=value strings, depends= among them.
	depends=$(tr '\0' '\n' <"$path" | sed -n 's/^depends=//p' | head -1 | tr ',' ' ')
	queue="$queue $depends"
	load_order="$load_order $name"
done
cp "$work/kernel/lib/modules/$kernel_version"/modules.{order,builtin} "$initrd/lib/modules/$kernel_version/" 2>/dev/null || true
"$busybox" depmod -b "$initrd" "$kernel_version"
# shellcheck disable=SC2086 # one module name a line
printf '%s\n' $load_order >"$initrd/etc/modules"
cat >"$initrd/init" <<'EOF'
#!/bin/busybox sh
# Loads the virtio drivers, mounts the root disk and hands over to its init.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r module; do modprobe "$module" 2>/dev/null; done </etc/modules
root=/dev/vda
for arg in $(cat /proc/cmdline); do
	case "$arg" in root=/dev/*) root=${arg#root=} ;; esac
done
tries=0
while [ ! -b "$root" ] && [ $tries -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
if ! mount -t ext4 -o rw "$root" /newroot; then
	echo "initramfs: cannot mount the root disk $root" >/dev/console
	exec sh
fi
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /sbin/init
EOF
chmod 0755 "$initrd/init"
(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -9n >"$out/initrd.img"

log "configuring the root file system"
rm -f "$root"/tmp/*.deb
cp "$busybox" "$root/bin/busybox"
ln -sf /bin/busybox "$root/sbin/init"
for part in boot first-boot sandbox shutdown udhcpc; do
	install -m 0755 -D "$guest_files/$part.sh" "$root/usr/lib/better-compute-guest/$part"
done
install -m 0755 -D "$guest_files/power-button.sh" "$root/etc/acpi/PWRF/00000080"
# A login prompt on the serial console (what `console --instance` shows once the guest is up);
# accounts without a password cannot log in there, so SSH with a key stays the way in.
cat >"$root/etc/inittab" <<'EOF'
::sysinit:/usr/lib/better-compute-guest/boot
ttyS0::respawn:/bin/busybox getty -L 115200 ttyS0 vt100
::ctrlaltdel:/bin/busybox poweroff
::shutdown:/usr/lib/better-compute-guest/shutdown
EOF
cat >"$root/etc/ssh/sshd_config.d/better-compute.conf" <<'EOF'
# Keys only; one ed25519 host key, generated on each instance's first boot.
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
EOF
printf 'localhost\n' >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$root/etc/fstab"
chroot "$root" useradd --create-home --shell /bin/bash --comment "default user" "$default_user"
chroot "$root" passwd --lock root >/dev/null
# Host keys belong to an instance, never to the image: each instance makes its own on first boot.
rm -f "$root"/etc/ssh/ssh_host_*
: >"$root/etc/machine-id"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
	"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
	"$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/root/.bash_history
printf 'better-compute-guest %s %s\n' "$build_key" "$kernel_version" >"$root/etc/better-compute-guest"

log "making the root disk"
mkfs.ext4 -q -F -L bc-root -d "$root" -E root_owner=0:0 "$work/rootfs.raw" "$root_disk_size"
qemu-img convert -O qcow2 "$work/rootfs.raw" "$out/rootfs.qcow2"
rm -f "$work/rootfs.raw"
printf '%s\n' "$kernel_cmdline" >"$out/cmdline"

(cd "$out" && sha256sum vmlinux initrd.img rootfs.qcow2 cmdline >SHA256SUMS)
file_entry() {
	local size digest
	size=$(stat -c %s "$out/$1")
	digest=$(sha256sum "$out/$1" | cut -d' ' -f1)
	printf '    "%s": { "size": %s, "sha256": "%s" }' "$1" "$size" "$digest"
}
{
	printf '{\n'
	printf '  "buildKey": "%s",\n' "$build_key"
	printf '  "suite": "%s",\n  "arch": "%s",\n' "$suite" "$arch"
	printf '  "kernelVersion": "%s",\n' "$kernel_version"
	printf '  "kernelCmdline": "%s",\n' "$kernel_cmdline"
	printf '  "defaultUser": "%s",\n' "$default_user"
	printf '  "rootDiskVirtualSize": "%s",\n' "$root_disk_size"
	printf '  "builtAt": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf '  "files": {\n'
	file_entry vmlinux
	printf ',\n'
	file_entry initrd.img
	printf ',\n'
	file_entry rootfs.qcow2
	printf '\n  }\n}\n'
} >"$out/manifest.json"

# Publish: the complete directory appears under its final name in one rename.
mv -T "$out" "$image_dir"
log "built $image_dir in $(($(date +%s) - started)) s"
printf '%s\n' "$image_dir"
