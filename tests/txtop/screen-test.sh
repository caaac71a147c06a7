#!/bin/sh
# tx-top in a real terminal: run it under tmux (a private server on its own
# socket) against a tx8-emu with a running workload, read the screen with
# capture-pane and drive it with send-keys.
#
#   BUILD=build-top tests/txtop/screen-test.sh
#
# Checks: the device header, the UTIL/MEM bars and their figures, the
# utilisation and memory charts (the workload's memory sawtooth zooms the
# memory chart), the process table row of the workload, the model panel
# (expert histogram and util std), the process's memory by label (its
# sub-rows, 'm' to hide them, wrapping at 48 columns), sorting keys,
# resizing down to a too-small
# terminal, an ASCII/no-colour terminal, 'k' + 'y' killing the workload,
# 'q' quitting with status 0, and that tx-top stays cheap (CPU time).
# Everything started here (tmux server, emulator, workload) is stopped by
# PID on exit, whatever happens.
set -u

BUILD=${BUILD:-build}
case $BUILD in /*) build=$BUILD ;; *) build=$(pwd)/$BUILD ;; esac
txtop=$build/bin/tx-top
emu=$build/bin/tx8-emu
load=$build/tests/test_txtop_live
for f in "$txtop" "$emu" "$load"; do
	if [ ! -x "$f" ]; then
		echo "screen-test: $f missing (make BUILD=$BUILD all tests)" >&2
		exit 1
	fi
done
if ! command -v tmux >/dev/null 2>&1; then
	echo "screen-test: tmux is not installed (scripts/install-deps)" >&2
	exit 1
fi

work=$(mktemp -d /tmp/txtop-screen-XXXXXX)
sock=$work/tx8.sock
tsock=$work/tmux.sock
shm=$work/shm
mkdir "$shm"
emu_pid=
load_pid=
tmux_pid=
passed=0
failed=0
screen=

t() { tmux -S "$tsock" "$@"; }

cleanup() {
	if [ -n "$tmux_pid" ]; then
		t kill-server 2>/dev/null
		kill "$tmux_pid" 2>/dev/null
		wait "$tmux_pid" 2>/dev/null
	fi
	if [ -n "$load_pid" ] && kill -0 "$load_pid" 2>/dev/null; then
		kill "$load_pid" 2>/dev/null
		wait "$load_pid" 2>/dev/null
	fi
	if [ -n "$emu_pid" ] && kill -0 "$emu_pid" 2>/dev/null; then
		kill "$emu_pid" 2>/dev/null
		wait "$emu_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ok() {
	passed=$((passed + 1))
	echo "screen-test: ok: $1"
}

bad() {
	failed=$((failed + 1))
	echo "screen-test: FAIL: $1"
	if [ -n "$screen" ]; then
		echo "---- screen ----"
		printf '%s\n' "$screen"
		echo "----------------"
	fi
}

capture() { screen=$(t capture-pane -p -t "$1" 2>/dev/null); }

# wait_for TARGET SECONDS REGEX: capture until the screen matches
wait_for() {
	i=0
	while [ "$i" -lt $(($2 * 10)) ]; do
		capture "$1"
		printf '%s\n' "$screen" | grep -Eq -- "$3" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

has() { printf '%s\n' "$screen" | grep -Eq -- "$1"; }

# child_of PID: a child process of PID (from /proc, no ps needed)
child_of() {
	parent=$1
	for f in /proc/[0-9]*/stat; do
		line=$(cat "$f" 2>/dev/null) || continue
		rest=${line##*) }
		set -f
		# shellcheck disable=SC2086
		set -- $rest
		set +f
		if [ "${2:-}" = "$parent" ]; then
			f=${f#/proc/}
			echo "${f%/stat}"
			return 0
		fi
	done
	return 1
}

# ---------------------------------------------------------------------------
# the device and its workload

"$emu" --socket "$sock" --memory 128M --cores 2 2>"$work/emu.log" &
emu_pid=$!
i=0
while [ ! -S "$sock" ] && [ "$i" -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -S "$sock" ] || { echo "screen-test: tx8-emu did not start"; cat "$work/emu.log"; exit 1; }

TX_TELEMETRY_DIR=$shm "$load" --workload "emu:$sock" 60 0.7 sawtooth >"$work/load.out" 2>&1 &
load_pid=$!
i=0
while ! grep -q '^ready' "$work/load.out" 2>/dev/null && [ "$i" -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
grep -q '^ready' "$work/load.out" || { echo "screen-test: the workload did not start"; cat "$work/load.out"; exit 1; }

# ---------------------------------------------------------------------------
# tx-top in a 120x40 UTF-8 colour terminal

cat >"$work/tmux.conf" <<EOF
set -g remain-on-exit on
set -g default-terminal screen
set -g status off
EOF
# our own server, in the foreground (-D): a child of this script, stopped
# and reaped by PID
tmux -S "$tsock" -f "$work/tmux.conf" -D </dev/null >"$work/tmux.log" 2>&1 &
tmux_pid=$!
i=0
while [ ! -S "$tsock" ] && [ "$i" -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -S "$tsock" ] || { echo "screen-test: the tmux server did not start"; cat "$work/tmux.log"; exit 1; }
t new-session -d -s top -x 120 -y 40 \
	"env LANG=C.UTF-8 LC_ALL=C.UTF-8 TX_TELEMETRY_DIR=$shm $txtop -d emu:$sock -d 5 2>$work/top.err; echo \$? >$work/top.rc"
# tx-top is the child of the pane's shell (which records its exit status:
# a sanitizer build's exit can outrun tmux's own bookkeeping)
pane_pid=$(t display -p -t top '#{pane_pid}')
top_pid=
i=0
while [ -z "$top_pid" ] && [ "$i" -lt 50 ]; do
	top_pid=$(child_of "$pane_pid")
	[ -z "$top_pid" ] && sleep 0.1
	i=$((i + 1))
done

if wait_for top 8 "^ +$load_pid +root +0 +[0-9.]+ "; then
	ok "process table shows the workload (PID $load_pid)"
else
	bad "no process row for PID $load_pid"
fi
# let the history fill a little (and the sawtooth go round once)
sleep 3
capture top
has "^\[0\] TX8 \(tx8-emu\) emu $sock +2 cores +interface 1\.[0-9]+ +ready" &&
	ok "device header" || bad "device header"
util=$(printf '%s\n' "$screen" | sed -n 's/.*UTIL\[[| ]*\([0-9.]*\)%\].*/\1/p' | head -n 1)
if [ -n "$util" ] && [ "${util%.*}" -ge 40 ]; then
	ok "utilisation bar shows the load ($util%, workload duty 70%)"
else
	bad "utilisation bar: '$util'"
fi
has "MEM\[\|+ +[0-9.]+MiB/126\.0MiB\]" && ok "memory bar" || bad "memory bar"
has "jobs [0-9]+ \([0-9.]+/s\) +failed 0" && ok "counters line" || bad "counters line"
has "utilisation %, last" && has "█" && ok "utilisation chart" || bad "utilisation chart"
# the sawtooth moves device memory: the chart zooms onto it (not 0B-total)
if has "device memory [0-9.]+MiB-[0-9.]+MiB"; then
	ok "memory chart zoomed on the sawtooth"
else
	bad "memory chart range"
fi
row=$(printf '%s\n' "$screen" | grep -E "^ +$load_pid ")
case $row in
*test_txtop_live*) ok "process row command" ;;
*) bad "process row: $row" ;;
esac
# the process's memory by label, under its row: the model prefix once, the
# four per-slot KV buffers folded into one item, the other labels
if has "└ txtop-test: Activations 1\.0MiB +KVCache 3\.0MiB" && has "KV_slot0-3 4x512\.0KiB" &&
	has "Weights 1\.0MiB"; then
	ok "memory by label under the process row (KV per slot folded)"
else
	bad "memory-by-label sub-row"
fi
has "Model txtop-test +pid $load_pid +6 layers x 16 experts \(4 with load\) +expert util std [0-9.]+% +on \[0\] emu:" &&
	ok "model panel header" || bad "model panel header"
has "expert load, all layers +hottest [0-9.]+% of calls" && has " e0 +e15" &&
	ok "expert histogram" || bad "expert histogram"
has "PID USER +DEV +BUSY%▼ +VRAM +HOST MEM COMMAND" && ok "table header, sorted by BUSY%" ||
	bad "table header"

# sorting: '<' moves to DEV (ascending), 'r' reverses, F6 moves on
t send-keys -t top '<'
wait_for top 3 "DEV▲" && ok "'<' sorts by DEV" || bad "'<' sort"
t send-keys -t top r
wait_for top 3 "DEV▼" && ok "'r' reverses" || bad "'r' reverse"
t send-keys -t top F6
wait_for top 3 "BUSY%▼" && ok "F6 next column" || bad "F6"
t send-keys -t top e
wait_for top 3 "expert load, layer [0-9]+ \(most imbalanced" && ok "'e' shows the worst layer" ||
	bad "'e' histogram mode"

# 'm' hides the memory-by-label rows, 'm' again shows them
t send-keys -t top m
i=0
while [ "$i" -lt 30 ]; do
	capture top
	has "└ txtop-test:" || break
	sleep 0.1
	i=$((i + 1))
done
! has "└ txtop-test:" && has "memory by label hidden" && ok "'m' hides the memory rows" ||
	bad "'m' hide"
t send-keys -t top m
wait_for top 3 "└ txtop-test:" && ok "'m' shows them again" || bad "'m' show"

# a narrow terminal: the labels wrap onto a second sub-row, nothing is cut
t resize-window -t top -x 48 -y 30
if wait_for top 3 "^  └ txtop-test: " && has "^    .*KV_slot0-3 4x512\.0KiB" &&
	! printf '%s\n' "$screen" | grep -q '.\{49\}'; then
	ok "48 columns: the label rows wrap"
else
	bad "48 columns: label rows"
fi

# resizing
t resize-window -t top -x 60 -y 14
wait_for top 3 "UTIL\[" && ok "60x14: still drawn" || bad "60x14"
t resize-window -t top -x 30 -y 6
wait_for top 3 "terminal too small" && ok "30x6: too small notice" || bad "30x6"
t resize-window -t top -x 120 -y 40
wait_for top 3 "^ +$load_pid " && ok "back to 120x40" || bad "120x40 again"

# ---------------------------------------------------------------------------
# a terminal without colours or UTF-8

t new-window -d -t top: -n plain \
	"env TERM=vt100 LANG=C LC_ALL=C NO_COLOR=1 TX_TELEMETRY_DIR=$shm $txtop -d emu:$sock -d 5"
if wait_for top:plain 8 "^ +$load_pid "; then
	sleep 1.5
	capture top:plain
	has "BUSY%v" && has "UTIL\[\|+" && has "#" && ! has "█" && has "^ +\` txtop-test: " &&
		ok "ASCII, no-colour terminal" || bad "ASCII terminal"
else
	bad "no process row in the ASCII terminal"
fi
t send-keys -t top:plain q

# ---------------------------------------------------------------------------
# cost: CPU time of tx-top so far (refresh every 0.5 s)

if [ -r "/proc/$top_pid/stat" ]; then
	ticks=$(awk '{print $14 + $15}' "/proc/$top_pid/stat")
	start=$(awk '{print $22}' "/proc/$top_pid/stat")
	hz=$(getconf CLK_TCK)
	up=$(awk '{print $1}' /proc/uptime)
	pct=$(awk -v t="$ticks" -v s="$start" -v hz="$hz" -v up="$up" \
		'BEGIN { w = up - s / hz; printf "%.1f", (w > 0 ? 100 * t / hz / w : 0) }')
	echo "screen-test: tx-top used ${pct}% of one CPU at a 0.5 s refresh"
	if [ "${pct%.*}" -lt 25 ]; then
		ok "no busy loop"
	else
		bad "tx-top CPU use ${pct}%"
	fi
fi

# ---------------------------------------------------------------------------
# kill the workload from tx-top: 'k', then 'y'

t send-keys -t top Home
t send-keys -t top k
if wait_for top 3 "Send SIGTERM to PID $load_pid \(.*\)\? \[y/N\]"; then
	ok "'k' asks before killing"
	t send-keys -t top y
	i=0
	while kill -0 "$load_pid" 2>/dev/null && [ "$i" -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	if ! kill -0 "$load_pid" 2>/dev/null; then
		wait "$load_pid" 2>/dev/null
		ok "'y' sent SIGTERM: the workload exited"
		load_pid=
	else
		bad "the workload is still running after 'y'"
	fi
	wait_for top 3 "SIGTERM sent to PID" && ok "kill confirmed on screen" || bad "kill message"
else
	bad "no kill prompt"
fi

# 'q' quits with status 0
t send-keys -t top q
i=0
while [ ! -s "$work/top.rc" ] && [ "$i" -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
st=$(cat "$work/top.rc" 2>/dev/null)
if [ "$st" = 0 ]; then
	ok "'q' quits, exit status 0"
else
	bad "after 'q': exit status '$st'"
	cat "$work/top.err"
fi

echo "screen-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
