#!/bin/sh
# metal.power off: bcd runs this only for a command its batch's approvers signed (docs/quorum.md).
# It schedules an orderly power-off with systemd a few seconds from now and exits at once, so bcd
# reports the command succeeded before the machine goes down. Needs root and systemd as init.
# Until it fires, "systemctl stop bcd-power.timer" cancels it.
set -eu
delay=5
if ! command -v systemd-run >/dev/null 2>&1; then
  echo "systemd-run is not installed: the power-off was not scheduled" >&2
  exit 1
fi
# One unit name for every power action: a second one while another is scheduled fails.
systemd-run --no-ask-password --quiet --unit=bcd-power \
  --on-active="${delay}s" --timer-property=AccuracySec=1s \
  systemctl poweroff
echo "powering off in ${delay}s (systemctl stop bcd-power.timer cancels it)"
