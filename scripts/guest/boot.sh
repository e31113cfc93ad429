#!/bin/sh
# Brings the guest up (busybox init runs this once as sysinit): file systems, the NoCloud seed's
# configuration, the network, the seed's user-data scripts, then SSH. SSH answers only once the
# instance is configured, so a client that reaches it sees the hostname and keys the seed gave.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
bb=/bin/busybox
agent=/usr/lib/better-compute-guest/first-boot

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=000 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm
mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs /run
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /tmp
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /run/sshd /var/log
chmod 0755 /run/sshd

hostname -F /etc/hostname
$bb ip link set lo up
# The ACPI power button (QMP system_powerdown) runs /etc/acpi/PWRF/00000080, which powers off cleanly.
$bb acpid

$agent configure

# An instance's seed gives its address (it sits on a tap device with no DHCP server behind it); a
# seed without network-config (sandboxes, on QEMU's user networking) leaves DHCP to do it.
if ! $agent network; then
	for interface in /sys/class/net/*; do
		interface=${interface##*/}
		[ "$interface" = lo ] && continue
		$bb udhcpc -i "$interface" -s /usr/lib/better-compute-guest/udhcpc -b -t 10 -T 1 -A 3 -S \
			-x hostname:"$(hostname)" >/dev/null 2>&1
	done
fi

$agent scripts

# The QEMU guest agent, on a VM that has its port (sandboxes do): the node gives a sandbox its
# identity through it (/usr/lib/better-compute-guest/sandbox), so it starts once the first-boot
# agent has made this boot's host key. Without udev the port is found by its name.
for port in /sys/class/virtio-ports/*; do
	[ "$(cat "$port/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] || continue
	/usr/sbin/qemu-ga --daemonize --method=virtio-serial --path="/dev/${port##*/}" \
		--logfile=/var/log/qemu-ga.log
done
/usr/sbin/sshd -E /var/log/sshd.log
# shellcheck disable=SC2016 # an awk program, not a shell expansion
address=$($bb ip -4 -o addr show scope global 2>/dev/null | $bb awk '{print $4; exit}')
printf 'better-compute-guest: ready instance-id=%s hostname=%s address=%s\n' \
	"$(cat /var/lib/better-compute-guest/instance-id 2>/dev/null)" "$(hostname)" "${address:-none}" >/dev/console
