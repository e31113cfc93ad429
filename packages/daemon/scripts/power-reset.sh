#!/bin/sh
# metal.power reset: bcd runs this only for a command its batch's approvers signed (docs/quorum.md).
# A reset restarts the machine at once, as its reset button would, without stopping services in
# order (systemctl reboot --force: processes are killed, file systems unmounted, then it reboots),
# so a machine whose services hang still restarts. It is scheduled with systemd a few seconds from
# now and this script exits at once, so bcd reports the command succeeded before the machine goes
# down. Needs root and systemd as init. Until it fires, "systemctl stop bcd-power.timer" cancels it.
set -eu
delay=5
if ! command -v systemd-run >/dev/null 2>&1; then
  echo "systemd-run is not installed: the reset was not scheduled" >&2
  exit 1
fi
# One unit name for every power action: a second one while another is scheduled fails.
systemd-run --no-ask-password --quiet --unit=bcd-power \
  --on-active="${delay}s" --timer-property=AccuracySec=1s \
  systemctl reboot --force
echo "resetting in ${delay}s (systemctl stop bcd-power.timer cancels it)"
