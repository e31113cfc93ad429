#!/bin/sh
# The guest's first-boot agent: reads a NoCloud seed (a volume labelled cidata holding meta-data and
# user-data) and applies the subset of cloud-init the platform uses.
#
#   first-boot configure   every boot: hostname; on an instance's first boot also new SSH host keys and
#                          the authorized keys of the default user (and root when the seed says so)
#   first-boot scripts     on an instance's first boot: runs user-data that is a script (#!) and the
#                          runcmd list of a #cloud-config
#   first-boot network     every boot: applies the seed's network-config; fails (status 1) when the
#                          seed has none, so the caller falls back to DHCP
#
# meta-data:  instance-id, local-hostname, public-keys (a list or one key)
# user-data:  either a script starting with #!, or #cloud-config with hostname, ssh_authorized_keys,
#             disable_root (false lets the keys log in as root too) and runcmd (a list of shell lines)
# network-config: the subset of NoCloud's version 2 the node writes: one ethernet matched by its
#             macaddress, one IPv4 "addresses" item (a - list), gateway4, and nameservers' inline
#             addresses list. Values are checked before use; anything else in the file is ignored.
# An instance is new when the seed's instance-id differs from the one recorded at its last boot, so a
# disk cloned from another instance makes its own host keys and runs its own scripts.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
umask 022
state=/var/lib/better-compute-guest
seed=/run/better-compute-seed
default_user=debian
log=/var/log/better-compute-guest.log

say() { printf 'better-compute-guest: %s\n' "$*" | tee -a "$log" >/dev/console; }

mount_seed() {
	[ -f "$seed/meta-data" ] && return 0
	device=""
	for label in cidata CIDATA; do
		device=$(blkid -t LABEL="$label" -o device 2>/dev/null | head -1)
		[ -n "$device" ] && break
	done
	[ -n "$device" ] || return 1
	mkdir -p "$seed"
	mount -o ro "$device" "$seed" 2>/dev/null || return 1
	[ -f "$seed/meta-data" ]
}

# Removes one pair of matching quotes around a YAML scalar.
unquote() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\\1/"; }

# yaml_scalar KEY FILE: the value of a top-level "KEY: value" line.
yaml_scalar() { sed -n "s/^$1:[[:space:]]*\(..*\)\$/\1/p" "$2" 2>/dev/null | head -1 | unquote; }

# yaml_list KEY FILE: the items of a top-level "KEY:" block list, or its inline scalar.
yaml_list() {
	awk -v key="$1" '
		index($0, key ":") == 1 {
			rest = substr($0, length(key) + 2); sub(/^[ \t]+/, "", rest)
			if (rest != "") { print rest; listing = 0 } else listing = 1
			next
		}
		listing && /^[ \t]*-[ \t]/ { item = $0; sub(/^[ \t]*-[ \t]+/, "", item); print item; next }
		listing && /^[ \t]*(#.*)?$/ { next }
		listing { listing = 0 }
	' "$2" 2>/dev/null | while IFS= read -r line; do printf '%s\n' "$line" | unquote; done
}

is_cloud_config() { [ "$(head -c 13 "$seed/user-data" 2>/dev/null)" = "#cloud-config" ]; }
is_script() { [ "$(head -c 2 "$seed/user-data" 2>/dev/null)" = "#!" ]; }

valid_hostname() {
	printf '%s' "$1" | grep -Eq '^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$' &&
		[ "${#1}" -le 253 ]
}

authorized_keys() {
	{
		yaml_list public-keys "$seed/meta-data"
		is_cloud_config && yaml_list ssh_authorized_keys "$seed/user-data"
	} | grep -E '^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/=]+( [[:print:]]*)?$' |
		awk '!seen[$0]++'
}

install_keys() { # HOME_DIR OWNER
	mkdir -p "$1/.ssh"
	chmod 0700 "$1/.ssh"
	authorized_keys >"$1/.ssh/authorized_keys.new"
	chmod 0600 "$1/.ssh/authorized_keys.new"
	mv "$1/.ssh/authorized_keys.new" "$1/.ssh/authorized_keys"
	chown -R "$2:$2" "$1/.ssh"
}

instance_id() { yaml_scalar instance-id "$seed/meta-data"; }
recorded_instance_id() { cat "$state/instance-id" 2>/dev/null; }

configure() {
	mkdir -p "$state"
	if ! mount_seed; then
		say "no NoCloud seed (a volume labelled cidata with meta-data); keeping the previous configuration"
		[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
		return 0
	fi
	id=$(instance_id)
	[ -n "$id" ] || id=nocloud-without-id

	name=$(yaml_scalar local-hostname "$seed/meta-data")
	if is_cloud_config; then
		override=$(yaml_scalar hostname "$seed/user-data")
		[ -n "$override" ] && name=$override
	fi
	if [ -n "$name" ]; then
		if valid_hostname "$name"; then
			printf '%s\n' "$name" >/etc/hostname
			printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s %s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
				"$name" "${name%%.*}" >/etc/hosts
			hostname "$name"
		else
			say "ignoring an invalid hostname from the seed"
		fi
	fi

	if [ "$id" != "$(recorded_instance_id)" ]; then
		say "first boot of instance $id"
		rm -f /etc/ssh/ssh_host_*
		ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
		home=$(getent passwd "$default_user" | cut -d: -f6)
		install_keys "$home" "$default_user"
		if is_cloud_config && [ "$(yaml_scalar disable_root "$seed/user-data")" = false ]; then
			install_keys /root root
		else
			rm -f /root/.ssh/authorized_keys
		fi
		# The scripts of this instance are still to run; "scripts" records the id once they have.
		printf '%s\n' "$id" >"$state/pending-instance-id"
	fi
	[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
}

run_scripts() {
	[ -f "$state/pending-instance-id" ] || return 0
	id=$(cat "$state/pending-instance-id")
	work="$state/instances/$id"
	mkdir -p "$work"
	if is_script; then
		cp "$seed/user-data" "$work/user-data"
		chmod 0700 "$work/user-data"
		say "running the user-data script"
		(cd / && "$work/user-data") >>"$log" 2>&1 || say "the user-data script failed with status $?"
	elif is_cloud_config; then
		yaml_list runcmd "$seed/user-data" >"$work/runcmd"
		if [ -s "$work/runcmd" ]; then
			say "running runcmd"
			(cd / && sh -e "$work/runcmd") >>"$log" 2>&1 || say "runcmd failed with status $?"
		fi
	fi
	printf '%s\n' "$id" >"$state/instance-id"
	rm -f "$state/pending-instance-id"
	sync
}

# Sets $trimmed to $1 without its leading and trailing blanks and one pair of double quotes.
trim() {
	trimmed=$1
	trimmed=${trimmed#"${trimmed%%[![:space:]]*}"}
	trimmed=${trimmed%"${trimmed##*[![:space:]]}"}
	case $trimmed in \"*\") trimmed=${trimmed#\"} trimmed=${trimmed%\"} ;; esac
}

# Whether $1 is a dotted quad (four parts of one to three digits), checked by the shell alone.
is_ipv4() {
	case $1 in '' | *[!0-9.]* | .* | *. | *..*) return 1 ;; esac
	rest=$1
	for _ in 1 2 3; do
		part=${rest%%.*}
		[ "$part" != "$rest" ] || return 1
		case $part in ? | ?? | ???) ;; *) return 1 ;; esac
		rest=${rest#*.}
	done
	case $rest in *.*) return 1 ;; ? | ?? | ???) return 0 ;; *) return 1 ;; esac
}

# The seed's network-config, read in one pass by the shell itself: it runs on every boot, before
# SSH, and each program started under emulation costs the boot tens of milliseconds.
configure_network() {
	config="$seed/network-config"
	mount_seed >/dev/null 2>&1 && [ -f "$config" ] || return 1
	mac='' address='' gateway='' servers=''
	while IFS= read -r line || [ -n "$line" ]; do
		trim "$line"
		case $trimmed in
		macaddress:*) [ -n "$mac" ] || { trim "${trimmed#macaddress:}" && mac=$trimmed; } ;;
		gateway4:*) [ -n "$gateway" ] || { trim "${trimmed#gateway4:}" && gateway=$trimmed; } ;;
		addresses:*\[*\]) trim "${trimmed#addresses:}" && servers=${trimmed#\[} && servers=${servers%\]} ;;
		-*) [ -n "$address" ] || { trim "${trimmed#-}" && address=$trimmed; } ;;
		esac
	done <"$config"
	if ! is_ipv4 "${address%/*}" || [ "$address" = "${address%/*}" ]; then
		say "network-config has no IPv4 address; using DHCP"
		return 1
	fi
	case ${address#*/} in [0-9] | [0-9][0-9]) ;; *) say "network-config's prefix length is malformed; using DHCP"; return 1 ;; esac
	interface=""
	for path in /sys/class/net/*; do
		name=${path##*/}
		[ "$name" = lo ] && continue
		# Without a MAC to match, the first interface takes the address (the node gives one).
		found=''
		[ -z "$mac" ] || read -r found <"$path/address" 2>/dev/null || true
		if [ -z "$mac" ] || [ "$found" = "$mac" ]; then
			interface=$name
			break
		fi
	done
	[ -n "$interface" ] || { say "no interface has the MAC address network-config names; using DHCP"; return 1; }
	# iproute2 is not in the image: busybox's ip does it.
	/bin/busybox ip link set "$interface" up
	/bin/busybox ip -4 addr flush dev "$interface"
	/bin/busybox ip -4 addr add "$address" dev "$interface"
	if is_ipv4 "$gateway"; then
		/bin/busybox ip -4 route replace default via "$gateway" dev "$interface"
	fi
	resolvers=''
	set -f
	old_ifs=$IFS
	IFS=', '
	for server in $servers; do
		is_ipv4 "$server" && resolvers="${resolvers}nameserver $server
"
	done
	IFS=$old_ifs
	set +f
	[ -z "$resolvers" ] || printf '%s' "$resolvers" >/etc/resolv.conf
	return 0
}

case "${1:-}" in
configure) configure ;;
scripts) mount_seed >/dev/null 2>&1 || true; run_scripts ;;
network) configure_network ;;
*) echo "usage: first-boot configure|scripts|network" >&2; exit 2 ;;
esac
