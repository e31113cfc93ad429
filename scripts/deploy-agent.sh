#!/bin/busybox sh
# The deploy ramdisk's agent: /init of the initramfs scripts/build-deploy-ramdisk.sh builds. A site
# agent boots a machine into it over its provisioning network, with what to do on the kernel
# command line:
#   bc.purpose=inspect   report the machine's hardware
#   bc.purpose=clean     erase the metadata of every writable disk, and report what was erased
#   bc.report=URL        where to POST the report (the site agent's /cgi-bin/report)
#   bc.token=HEX         the one-time token the site agent gave this MAC's entry
#   BOOTIF=MAC           the card it booted from (iPXE adds it)
# The report is JSON: { mac, token, purpose, inventory } (inspect) or { mac, token, purpose, cleaning }
# (clean), as core's metalInventorySchema and metalCleaningSchema read them. Then the agent waits for the control plane to power the machine
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

# The machine's disks, one name a line: what the kernel calls a block device, less the virtual ones.
disks() {
	for disk in /sys/block/*; do
		name=${disk##*/}
		case "$name" in loop* | ram* | sr* | fd* | zram* | dm-*) continue ;; esac
		printf '%s' "$name" | grep -qx '[a-z0-9]\{1,32\}' && printf '%s\n' "$name"
	done
}

uuid_json() {
	uuid=$(lower </sys/class/dmi/id/product_uuid 2>/dev/null | tr -cd '0-9a-f-')
	if [ ${#uuid} -eq 36 ]; then printf '"%s"' "$uuid"; else printf null; fi
}

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
	printf '{"systemUuid":%s,' "$(uuid_json)"
	printf '"cpu":{"count":%d,"model":"%s"},' "$cpus" "$model"
	printf '"memory":{"physicalMiB":%d,"totalKiB":%d},' "$physical_mib" "${total_kib:-0}"
	printf '"disks":['
	first=1
	for name in $(disks); do
		disk=/sys/block/$name
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

# Zeroes COUNT sectors of /dev/NAME from sector SEEK, written through to the disk.
zero() { dd if=/dev/zero of="/dev/$1" bs=512 seek="$2" count="$3" conv=notrunc,fsync 2>/dev/null; }
# Whether COUNT sectors of /dev/NAME from sector SKIP read back as zeroes.
zeroed() { [ -z "$(dd if="/dev/$1" bs=512 skip="$2" count="$3" 2>/dev/null | tr -d '\000' | head -c 1)" ]; }

# Ironic's metadata erase (erase_devices_metadata): on every writable disk, the first MiB of each
# partition (where file systems keep their signatures), then the first and last MiB of the disk (the
# partition table and GPT's backup), read back to check. The data between stays: the disks go back
# to their own tenant's pool (docs/decisions/metal-cleaning.md). Prints the cleaning's JSON.
cleaning() {
	failed=
	printf '{"systemUuid":%s,"disks":[' "$(uuid_json)"
	first=1
	for name in $(disks); do
		[ "$(cat "/sys/block/$name/ro" 2>/dev/null)" = 0 ] || continue
		sectors=$(cat "/sys/block/$name/size")
		erased=0
		partitions=0
		for part in /sys/block/"$name"/"$name"*; do
			[ -r "$part/start" ] || continue
			start=$(cat "$part/start")
			count=$(cat "$part/size")
			[ "$count" -gt 2048 ] && count=2048
			zero "$name" "$start" "$count" || failed="writing the start of ${part##*/} failed"
			erased=$((erased + count * 512))
			partitions=$((partitions + 1))
		done
		count=2048
		[ "$sectors" -lt $count ] && count=$sectors
		zero "$name" 0 "$count" || failed="writing the start of $name failed"
		erased=$((erased + count * 512))
		if [ "$sectors" -gt $((count * 2)) ]; then
			zero "$name" $((sectors - count)) "$count" || failed="writing the end of $name failed"
			erased=$((erased + count * 512))
		fi
		zeroed "$name" 0 "$count" || failed="the start of $name did not read back as zeroes"
		blockdev --rereadpt "/dev/$name" 2>/dev/null
		[ $first -eq 1 ] || printf ','
		first=0
		printf '{"name":"%s","sizeBytes":%s,"partitions":%d,"erasedBytes":%d}' \
			"$name" "$((sectors * 512))" "$partitions" "$erased"
		[ -z "$failed" ] || break
	done
	sync
	if [ -n "$failed" ]; then printf '],"failed":"%s"}' "$(printf '%s' "$failed" | plain)"; else printf '],"failed":null}'; fi
}

# POSTs /tmp/report.json to the site agent, a few times if it does not answer.
send_report() {
	for attempt in 1 2 3 4 5 6 7 8 9 10; do
		wget -q -O /dev/null --post-file /tmp/report.json "$report" && return 0
		say "reporting to $report failed (attempt $attempt); trying again"
		sleep 3
	done
	return 1
}

token=$(printf '%s' "$token" | tr -cd '0-9a-f')
case "$purpose" in
inspect)
	printf '{"mac":"%s","token":"%s","purpose":"inspect","inventory":%s}' \
		"$bootif" "$token" "$(inventory)" >/tmp/report.json
	if send_report; then say "inspection reported"; else say "inspection could not be reported"; fi
	;;
clean)
	printf '{"mac":"%s","token":"%s","purpose":"clean","cleaning":%s}' \
		"$bootif" "$token" "$(cleaning)" >/tmp/report.json
	if send_report; then say "cleaning reported"; else say "cleaning could not be reported"; fi
	;;
*) say "nothing to do for purpose ${purpose:-none}" ;;
esac
# The control plane powers the machine off when it has what it needs.
exec sleep 2147483647
