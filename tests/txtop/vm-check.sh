#!/bin/sh
# tx-top against the kernel driver, inside the dev box guest (busybox sh).
# Meant to be called by the VM suite (tests/vm/run-suite):
#
#   /opt/tx8/txtop/vm-check.sh [DEV_INDEX]
#
# It prints "PASS txtop-..." / "FAIL txtop-..." lines and exits non-zero
# if anything failed. With the libtx workload it also checks the full-screen
# view on a pseudo-terminal (ptyrun, tests/vm/ptyrun.c). The workload is, in
# order of preference:
#   - test_txtop_live --workload (libtx, needs libtx's accel backend): known
#     buffer sizes and labels, a 50% duty cycle, a published model;
#   - otherwise a loop of `tx8_vmtest stress` (raw UAPI clients).
# Programs are looked up in $PATH, /opt/tx8/tests and /opt/tx8/vm.
set -u

dev=${1:-0}
node=/dev/accel/accel$dev
PATH=$PATH:/opt/tx8/bin:/opt/tx8/tests:/opt/tx8/vm:/usr/bin
failed=0
passed=0
load_pid=

pass() { passed=$((passed + 1)); echo "PASS txtop-$1"; }
fail() { failed=$((failed + 1)); echo "FAIL txtop-$1"; }

cleanup() {
	if [ -n "$load_pid" ]; then
		kill "$load_pid" 2>/dev/null
		wait "$load_pid" 2>/dev/null
	fi
	rm -f /tmp/txtop-vm.json /tmp/txtop-vm.load /tmp/txtop-vm.screen
}
trap cleanup EXIT

# "key": value of the first occurrence after the line matching $2 (or
# anywhere): JSON as tx-top pretty-prints it, one key per line
jget() { # FILE KEY
	sed -n "s/^ *\"$2\": \(.*\)/\1/p" "$1" | sed 's/,$//' | head -n 1
}

command -v tx-top >/dev/null 2>&1 || { fail "present (no tx-top in PATH)"; exit 1; }
[ -e "$node" ] || { fail "device ($node missing)"; exit 1; }

# -L: the accel node with its PCI address and interface version
out=$(tx-top -L -d "$node")
case $out in
"Device 0: "*"(accel$dev, PCI "*", interface 1."*) pass "list" ;;
*) fail "list: $out" ;;
esac

# The full-screen view on a terminal (a pty of 120x40 run by ptyrun, which
# prints the screen tx-top leaves after 4 refreshes): header, bars, the
# workload's process row and its model. TERM=xterm: the terminfo entry the
# image carries for `make vm` sessions from a usual terminal.
screen_check() {
	if ! command -v ptyrun >/dev/null 2>&1; then
		fail "screen (no ptyrun in the image)"
		return
	fi
	TERM=xterm ptyrun -s 120x40 -t 60 -- tx-top -d "$node" -d 5 -n 4 >/tmp/txtop-vm.screen 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "screen: exit $rc"
		sed 's/^/  screen: /' /tmp/txtop-vm.screen
		return
	fi
	has() { grep -Eq "$1" /tmp/txtop-vm.screen; }
	ok=1
	has "^\[0\] TX8.* accel$dev  PCI $pci  [0-9]+ cores  interface 1\.[0-9]+" ||
		{ ok=0; echo "  screen: no device header"; }
	has "UTIL\[.*[0-9.]+%\] +MEM\[.*MiB/[0-9.]+MiB\]" || { ok=0; echo "  screen: no bars"; }
	has "^ +$load_pid +root +0 +[0-9.]+ .*test_txtop_live" ||
		{ ok=0; echo "  screen: no process row for PID $load_pid"; }
	has "^Model txtop-test +pid $load_pid " || { ok=0; echo "  screen: no model panel"; }
	# its memory by label under its row (the only process holding memory)
	has "^ +(└|\`) txtop-test: .*KVCache 3\.0MiB.*Weights 1\.0MiB" ||
		{ ok=0; echo "  screen: no memory-by-label row under the workload"; }
	if [ $ok -eq 1 ]; then
		pass "screen (full-screen view on a 120x40 terminal, TERM=xterm)"
	else
		fail "screen"
		sed 's/^/  screen: /' /tmp/txtop-vm.screen
	fi
}

# a workload
if command -v test_txtop_live >/dev/null 2>&1 &&
	test_txtop_live --workload "$node" 0.1 0.5 >/dev/null 2>&1; then
	kind=libtx
	test_txtop_live --workload "$node" 15 0.5 >/tmp/txtop-vm.load 2>&1 &
	load_pid=$!
	i=0
	while ! grep -q '^ready' /tmp/txtop-vm.load && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
else
	kind=vmtest
	(while :; do tx8_vmtest stress "$dev" >/dev/null 2>&1; done) &
	load_pid=$!
	sleep 1
fi

# one snapshot over 2 s
if tx-top --json -d "$node" -d 20 >/tmp/txtop-vm.json; then
	pass "json exit status"
else
	fail "json exit status"
fi
[ "$(jget /tmp/txtop-vm.json status)" = '"ok"' ] && pass "json device ok" || fail "json device status"
[ "$(jget /tmp/txtop-vm.json backend)" = '"accel"' ] && pass "json backend" || fail "json backend"
pci=$(cat "/sys/class/accel/accel$dev/device/uevent" 2>/dev/null | sed -n 's/^PCI_SLOT_NAME=//p')
[ "$(jget /tmp/txtop-vm.json pci_address)" = "\"$pci\"" ] && pass "json pci address" ||
	fail "json pci address ($pci)"
util=$(jget /tmp/txtop-vm.json utilization)
case $util in
null | 0 | 0.0 | "") fail "json utilisation under load ($util)" ;;
*) pass "json utilisation under load ($util%)" ;;
esac
total=$(jget /tmp/txtop-vm.json total)
[ "$total" = "$(cat /sys/class/accel/accel$dev/device/tx8/mem_total)" ] && pass "json memory total" ||
	fail "json memory total ($total)"
grep -q '"page_faults": [0-9]' /tmp/txtop-vm.json && pass "json page faults (driver)" ||
	fail "json page faults"

if [ "$kind" = libtx ]; then
	# the workload's row (fdinfo), its labels (/proc/tx_meminfo), its model
	grep -q "\"pid\": $load_pid," /tmp/txtop-vm.json && pass "process row (fdinfo)" ||
		fail "process row for PID $load_pid"
	grep -A1 '"label": "txtop-test_Weights"' /tmp/txtop-vm.json | grep -q '"size": 1048576' &&
		pass "label sizes (/proc/tx_meminfo)" || fail "label txtop-test_Weights"
	# the same labels on the workload's own row (the only process holding
	# memory on the device: the device's labels are its)
	sed -n '/"memory_labels"/,$p' /tmp/txtop-vm.json | grep -A1 '"label": "txtop-test_KVCache"' |
		grep -q '"size": 3145728' && pass "process row memory_labels" ||
		fail "process row memory_labels (txtop-test_KVCache)"
	grep -q '"model": "txtop-test"' /tmp/txtop-vm.json && pass "model (telemetry)" ||
		fail "model txtop-test"
	screen_check
else
	# short-lived clients: look at a few refreshes
	tx-top --json -l -n 5 -d "$node" -d 5 >/tmp/txtop-vm.json
	grep -q '"command":"[^"]*tx8_vmtest stress' /tmp/txtop-vm.json &&
		pass "process rows (fdinfo)" || fail "no tx8_vmtest process row"
fi

echo "txtop vm-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
