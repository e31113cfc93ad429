#!/bin/sh
# A read-only health check of the node: uptime, load, memory and the fullest file systems.
set -eu
echo "uptime: $(cat /proc/uptime)"
echo "load: $(cat /proc/loadavg)"
grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
df -P -k 2>/dev/null | awk 'NR > 1 { print $5, $6 }' | sort -rn | head -n 5
