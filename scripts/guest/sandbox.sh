#!/bin/sh
# The guest's side of a qemu sandbox's identity, run by the node through the QEMU guest agent
# (guest-exec) with its input on standard input. The node makes every secret; this only installs it.
#
#   sandbox identity   input: "key=value" lines: sandbox-id, user-ca (the sandbox SSH CA's public
#                      key), host-key (the new host private key, base64), host-public-key (its
#                      public line), time (seconds since the epoch, as the node's clock says),
#                      entropy (random bytes, base64). Sets the
#                      clock, mixes the entropy into the kernel's pool, replaces the SSH host key
#                      and trusts certificates from user-ca naming sandbox-id for root. A memory
#                      restore runs it to stop sharing its source's identity; a fresh sandbox runs
#                      it once it has booted.
#                      Its input may also hold env: the template's variables as a script for sh
#                      (base64), kept in /run only (never on the disk a snapshot copies); while
#                      there is one, every SSH session is this script's `session`.
#   sandbox certify    input: the host certificate the control plane signed for that key (the node
#                      checked it is one). Restarts sshd's listener with all of it (sessions already
#                      open stay): until then the sandbox is not ready, so one restart serves both.
#   sandbox session    sshd's forced command while the sandbox has variables: sets them, then runs
#                      the session's command (or a login shell) through root's shell, as sshd would.
# The guest may be emulated: every program run here costs, so the node does the checking.
envfile=/run/better-compute-sandbox/env

# A session keeps sshd's own PATH and umask: it is handled before this script sets its own.
if [ "${1:-}" = session ]; then
	if [ -f "$envfile" ]; then
		. "$envfile"
	else
		echo "sandbox: the sandbox's variables are gone (its guest restarted); this session runs without them" >&2
	fi
	[ -n "${SSH_ORIGINAL_COMMAND+set}" ] && exec "${SHELL:-/bin/sh}" -c "$SSH_ORIGINAL_COMMAND"
	exec "${SHELL:-/bin/sh}" -l
fi

PATH=/usr/sbin:/usr/bin:/sbin:/bin
umask 077
key=/etc/ssh/ssh_host_ed25519_key
dir=/etc/ssh/better-compute-sandbox
# Sorted before the image's own drop-in, so its values win (sshd keeps the first it reads).
conf=/etc/ssh/sshd_config.d/00-sandbox.conf

fail() { printf 'sandbox: %s\n' "$1" >&2; exit 1; }

write_config() {
	{
		printf 'TrustedUserCAKeys %s/user_ca.pub\n' "$dir"
		printf 'AuthorizedPrincipalsFile %s/principals\n' "$dir"
		[ -f "$key-cert.pub" ] && printf 'HostCertificate %s-cert.pub\n' "$key"
		[ -f "$envfile" ] && printf 'ForceCommand /usr/lib/better-compute-guest/sandbox session\n'
		printf '%s\n' 'AuthorizedKeysFile none' 'PermitRootLogin prohibit-password' 'AllowUsers root' \
			'DisableForwarding yes' 'PermitTunnel no' 'PermitUserEnvironment no' 'PrintMotd no'
	} >"$conf.new"
	mv "$conf.new" "$conf"
}

# sshd re-executes itself on SIGHUP with the new configuration and host key; one that is not
# running (a fresh boot that had not reached it) is started. Either way this returns once sshd
# listens again, which it says by writing its pid file: a connection made while it re-executes
# would be refused.
restart_sshd() {
	pid=$(cat /run/sshd.pid 2>/dev/null)
	rm -f /run/sshd.pid
	if [ -z "$pid" ] || ! kill -HUP "$pid" 2>/dev/null; then
		mkdir -p /run/sshd
		/usr/sbin/sshd -E /var/log/sshd.log || fail "sshd did not start"
	fi
	tries=0
	until [ -s /run/sshd.pid ]; do
		tries=$((tries + 1))
		[ "$tries" -le 300 ] || fail "sshd did not listen again within 30 s"
		sleep 0.1
	done
}

identity() {
	id="" ca="" host_key="" host_public_key="" now="" entropy="" env=""
	while IFS='=' read -r name value; do
		case $name in
		sandbox-id) id=$value ;;
		user-ca) ca=$value ;;
		host-key) host_key=$value ;;
		host-public-key) host_public_key=$value ;;
		time) now=$value ;;
		entropy) entropy=$value ;;
		env) env=$value ;;
		esac
	done
	printf '%s' "$id" | grep -Eq '^sbx_[A-Za-z0-9]{1,64}$' || fail "the sandbox id is malformed"
	printf '%s' "$ca" | grep -Eq '^ssh-ed25519 [A-Za-z0-9+/=]+( [[:print:]]*)?$' ||
		fail "the user CA is not an ed25519 public key"
	if [ -n "$now" ]; then
		printf '%s' "$now" | grep -Eq '^[0-9]{9,11}(\.[0-9]{1,9})?$' || fail "the time is malformed"
		date -u -s "@$now" >/dev/null || fail "setting the clock failed"
	fi
	# Written to the pool, the bytes are mixed in: two restores of one snapshot stop drawing the
	# same random numbers (the kernel also reseeds when QEMU's vmgenid says the VM was restored).
	[ -n "$entropy" ] && printf '%s' "$entropy" | base64 -d >/dev/urandom 2>/dev/null
	mkdir -p "$dir"
	printf '%s' "$host_public_key" | grep -Eq '^ssh-ed25519 [A-Za-z0-9+/=]+( [[:print:]]*)?$' ||
		fail "the host public key is not an ed25519 public key"
	printf '%s' "$host_key" | base64 -d >"$key.new" 2>/dev/null || fail "the host key is not base64"
	printf '%s\n' "$host_public_key" >"$key.pub.new"
	mv "$key.new" "$key"
	mv "$key.pub.new" "$key.pub"
	chmod 0644 "$key.pub"
	# A certificate for the old key would not match the new one.
	rm -f "$key-cert.pub"
	printf '%s\n' "$ca" >"$dir/user_ca.pub"
	printf '%s\n' "$id" >"$dir/principals"
	chmod 0644 "$dir/user_ca.pub" "$dir/principals"
	# A restore replaces its source's variables with its own, or drops them.
	mkdir -p "${envfile%/*}"
	if [ -n "$env" ]; then
		printf '%s' "$env" | base64 -d >"$envfile.new" 2>/dev/null || fail "the variables are not base64"
		mv "$envfile.new" "$envfile"
	else
		rm -f "$envfile"
	fi
	hostname "$(printf '%s' "$id" | tr _ -)"
	hostname >/etc/hostname
	write_config
}

certify() {
	IFS= read -r certificate || [ -n "$certificate" ] || fail "no certificate on standard input"
	printf '%s' "$certificate" | grep -Eq '^ssh-ed25519-cert-v01@openssh\.com [A-Za-z0-9+/=]+( [[:print:]]*)?$' ||
		fail "the certificate is not an ed25519 OpenSSH certificate"
	printf '%s\n' "$certificate" >"$key-cert.pub.new"
	chmod 0644 "$key-cert.pub.new"
	mv "$key-cert.pub.new" "$key-cert.pub"
	write_config
	restart_sshd
}

case "${1:-}" in
identity) identity ;;
certify) certify ;;
*) echo "usage: sandbox identity|certify (input on standard input) | session" >&2; exit 2 ;;
esac
