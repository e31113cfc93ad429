#!/bin/busybox sh
# The deploy ramdisk's agent: /init of the initramfs scripts/build-deploy-ramdisk.sh builds. A site
# agent boots a machine into it over its provisioning network, with what to do on the kernel
# command line:
#   bc.purpose=inspect   report the machine's hardware
#   bc.report=URL        where to POST the report (the site agent's /cgi-bin/report)
#   bc.token=HEX         the one-time token the site agent gave this MAC's entry
#   BOOTIF=MAC           the card it booted from (iPXE adds it)
# The report is JSON: { mac, token, purpose, inventory }, the inventory as core's
# metalInventorySchema reads it. Then the agent waits for the control plane to power the machine
# off. Every value it reports is taken from the kernel's view of the machine and reduced to plain
# characters before it is written into JSON, so no model name can break the document.
# shellcheck shell=sh

/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r module; do modprobe "$module" 2>/dev/null; done </etc/modules

say() { echo "bc-agent: $*" >/dev/console; }
arg() {
	# shellcheck disable=SC2013 # the command line is one line of words
	for word in $(cat /proc/cmdline); do
		case "$word" in "$1="*) printf '%s' "${word#*=}" && return 0 ;; esac
	done
	return 1
}
# Letters, digits and a few marks only: what a JSON string can hold without escaping.
plain() { tr -cd 'A-Za-z0-9 ()@.,:_+/-' | sed 's/^ *//; s/ *$//' | cut -c1-100; }
# An interface's sysfs name, lower case.
lower() { tr 'A-F' 'a-f'; }

purpose=$(arg bc.purpose) || purpose=
report=$(arg bc.report) || report=
token=$(arg bc.token) || token=
bootif=$(arg BOOTIF | lower) || bootif=
case "$bootif" in 01-*) bootif=$(printf '%s' "${bootif#01-}" | tr '-' ':') ;; esac
say "booted for ${purpose:-nothing} from ${bootif:-an unknown card}"

# The card it booted from, brought up with DHCP on the provisioning network.
iface=
tries=0
while [ -z "$iface" ] && [ $tries -lt 100 ]; do
	for dev in /sys/class/net/*; do
		[ "$(lower <"$dev/address" 2>/dev/null)" = "$bootif" ] && iface=${dev##*/}
	done
	[ -n "$iface" ] || { sleep 0.1; tries=$((tries + 1)); }
done
[ -n "$iface" ] || { say "no card with the MAC $bootif"; exec sleep 2147483647; }
cat >/tmp/udhcpc.sh <<'EOF'
#!/bin/sh
case "$1" in
bound | renew) ifconfig "$interface" "$ip" netmask "${subnet:-255.255.255.0}" up ;;
esac
EOF
chmod 0755 /tmp/udhcpc.sh
ip link set lo up
ip link set "$iface" up
udhcpc -i "$iface" -n -q -t 20 -T 2 -s /tmp/udhcpc.sh >/dev/null 2>&1 || { say "no DHCP answer on $iface"; exec sleep 2147483647; }

inventory() {
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | plain)
	total_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo)
	# The firmware's memory devices (SMBIOS type 17): what is installed, not what the kernel kept.
	physical_mib=0
	for entry in /sys/firmware/dmi/entries/17-*; do
		[ -r "$entry/raw" ] || continue
		size=$(od -An -tu2 -j12 -N2 "$entry/raw" | tr -d ' ')
		case "$size" in '' | 0 | 65535) continue ;; esac
		if [ "$size" -eq 32767 ]; then
			size=$(od -An -tu4 -j28 -N4 "$entry/raw" | tr -d ' ')
		elif [ "$size" -ge 32768 ]; then
			size=$(((size - 32768) / 1024))
		fi
		physical_mib=$((physical_mib + size))
	done
	uuid=$(lower </sys/class/dmi/id/product_uuid 2>/dev/null | tr -cd '0-9a-f-')
	printf '{"systemUuid":%s,' "$([ ${#uuid} -eq 36 ] && printf '"%s"' "$uuid" || printf null)"
	printf '"cpu":{"count":%d,"model":"%s"},' "$cpus" "$model"
	printf '"memory":{"physicalMiB":%d,"totalKiB":%d},' "$physical_mib" "${total_kib:-0}"
	printf '"disks":['
	first=1
	for disk in /sys/block/*; do
		name=${disk##*/}
		case "$name" in loop* | ram* | sr* | fd* | zram* | dm-*) continue ;; esac
		printf '%s' "$name" | grep -qx '[a-z0-9]\{1,32\}' || continue
		sectors=$(cat "$disk/size")
		disk_model=$(plain <"$disk/device/model" 2>/dev/null)
		serial=$(cat "$disk/serial" "$disk/device/serial" 2>/dev/null | head -1 | plain)
		rotational=$([ "$(cat "$disk/queue/rotational" 2>/dev/null)" = 1 ] && echo true || echo false)
		[ $first -eq 1 ] || printf ','
		first=0
		printf '{"name":"%s","sizeBytes":%s,"model":"%s","serial":"%s","rotational":%s}' \
			"$name" "$((sectors * 512))" "$disk_model" "$serial" "$rotational"
	done
	printf '],"nics":['
	first=1
	for dev in /sys/class/net/*; do
		name=${dev##*/}
		[ "$name" = lo ] && continue
		mac=$(lower <"$dev/address" | tr -cd '0-9a-f:')
		[ $first -eq 1 ] || printf ','
		first=0
		printf '{"name":"%s","mac":"%s"}' "$(printf '%s' "$name" | tr -cd 'A-Za-z0-9._-' | cut -c1-15)" "$mac"
	done
	printf ']}'
}

case "$purpose" in
inspect)
	printf '{"mac":"%s","token":"%s","purpose":"inspect","inventory":%s}' \
		"$bootif" "$(printf '%s' "$token" | tr -cd '0-9a-f')" "$(inventory)" >/tmp/report.json
	sent=0
	for attempt in 1 2 3 4 5 6 7 8 9 10; do
		if wget -q -O /dev/null --post-file /tmp/report.json "$report"; then
			sent=1
			break
		fi
		say "reporting to $report failed (attempt $attempt); trying again"
		sleep 3
	done
	if [ $sent -eq 1 ]; then say "inspection reported"; else say "inspection could not be reported"; fi
	;;
*) say "nothing to do for purpose ${purpose:-none}" ;;
esac
# The control plane powers the machine off when it has what it needs.
exec sleep 2147483647
