#!/bin/sh
# udhcpc's event script: applies the lease to the interface, the default route and resolv.conf.
# udhcpc passes the lease in the environment: interface, ip, mask, broadcast, router, dns, domain.
# shellcheck disable=SC2154
bb=/bin/busybox
case "$1" in
deconfig)
	$bb ip -4 addr flush dev "$interface"
	$bb ip link set "$interface" up
	;;
bound | renew)
	$bb ip -4 addr flush dev "$interface"
	$bb ip -4 addr add "$ip/${mask:-24}" ${broadcast:+broadcast "$broadcast"} dev "$interface"
	if [ -n "$router" ]; then
		# shellcheck disable=SC2086 # a space-separated list of routers; the first one wins
		set -- $router
		$bb ip -4 route replace default via "$1" dev "$interface"
	fi
	if [ -n "$dns" ]; then
		{
			[ -n "$domain" ] && printf 'search %s\n' "$domain"
			for server in $dns; do printf 'nameserver %s\n' "$server"; done
		} >/etc/resolv.conf
	fi
	;;
esac
exit 0
