#!/bin/sh
# Runs when init powers off or reboots: stop the services and leave the root file system clean.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
bb=/bin/busybox
$bb killall sshd udhcpc acpid 2>/dev/null
sync
$bb umount -a -r -t nodevtmpfs,noproc,nosysfs 2>/dev/null
$bb mount -o remount,ro / 2>/dev/null
sync
printf 'better-compute-guest: stopped\n' >/dev/console
