#!/bin/sh
# acpid runs this for the ACPI power button: ask init to power off (it runs the shutdown actions).
exec /bin/busybox poweroff
