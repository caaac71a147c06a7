#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/export-memory.sh: glm-export converts a checkpoint larger than the
# memory it may use (issue 38: "a package larger than host memory must
# still convert"). The host's memory is modelled by a memory cgroup of
# LIMIT bytes (v2, or v1's memory controller): glm-export streams the
# source through mmap and drops its pages as it goes (tools/lib/export.c),
# so it must finish inside a cgroup less than half the size of its input
# and its output, and write the very bytes an unconstrained export writes.
#   - the limit holds: a process that keeps 2 x LIMIT of anonymous memory
#     is killed in the same cgroup (the control);
#   - an FP8 checkpoint (glm-synth --fp8) to an FP8 package (--quant fp8,
#     weights bit for bit), to an INT8 package (--quant int8, dequantised
#     and quantised again), and a BF16 checkpoint to a BF16 package: each
#     exits 0 inside the cgroup, `glm-export --verify` passes, and the
#     package is byte-identical to the one made without a limit
#     (SOURCE_DATE_EPOCH fixes its "created" time).
# Needs root and a writable memory cgroup; otherwise SKIP. Prints
# "export-memory: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
# glm-export's own floor is about 55 MiB of anonymous memory (the tokenizer
# of 151k tokens, the conversion buffers): the limit leaves it 40 MiB
LIMIT_MB=${TX8_EXPORT_LIMIT_MB:-96}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "export-memory: ok: $*"; }
bad() { fail=$((fail + 1)); echo "export-memory: FAIL: $*"; }
skip() {
    echo "export-memory: SKIP: $*"
    echo "export-memory: 0 passed, 0 failed, 1 skipped"
    exit 0
}

# the cgroup: v2 (memory.max) or v1 (memory.limit_in_bytes)
cg=
if [ "$(id -u)" != 0 ]; then
    skip "needs root to make a memory cgroup"
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
    mkdir "/sys/fs/cgroup/tx8-export.$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/tx8-export.$$
    echo "${LIMIT_MB}M" > "$cg/memory.max" && echo 0 > "$cg/memory.swap.max" 2>/dev/null
    peakf=$cg/memory.peak
elif [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/tx8-export.$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/memory/tx8-export.$$
    echo "${LIMIT_MB}M" > "$cg/memory.limit_in_bytes" && echo 0 > "$cg/memory.swappiness"
    peakf=$cg/memory.max_usage_in_bytes
else
    skip "no writable memory cgroup (cgroup v2 with the memory controller, or v1's memory)"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tx8-export-memory.XXXXXX") || exit 1
cleanup() {
    rm -rf "$tmp"
    [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# run COMMAND... inside the cgroup; its exit status
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
size_mb() { du -smL "$1" | cut -f1; }

# the control: 2 x LIMIT of anonymous memory does not fit
big=$((LIMIT_MB * 2))
if in_cg /usr/bin/python3 -c "b = bytearray($big << 20); b[::4096] = b'x' * len(b[::4096])" \
    2>/dev/null; then
    bad "a process holding $big MiB survived the ${LIMIT_MB} MiB cgroup: the limit does not hold"
else
    ok "the ${LIMIT_MB} MiB cgroup kills a process holding $big MiB"
fi

export SOURCE_DATE_EPOCH=1700000000
# FP8: DeepSeek-V3 layout, BF16: GLM-5.1; the small preset with more and
# larger experts, about 230 MiB each
"$BUILD/bin/glm-synth" --arch deepseek3 --preset small --fp8 --quiet \
    --config-set num_hidden_layers=24,moe_intermediate_size=256 --experts 64 \
    --output "$tmp/fp8" || { bad "glm-synth --fp8"; exit 1; }
"$BUILD/bin/glm-synth" --arch glm5 --preset small --quiet \
    --config-set num_hidden_layers=12,moe_intermediate_size=256 --experts 64 \
    --output "$tmp/bf16" || { bad "glm-synth"; exit 1; }
for case in "fp8 fp8" "fp8 int8" "bf16 bf16"; do
    set -- $case
    src=$tmp/$1
    name="$1 checkpoint ($(size_mb "$src") MiB) --quant $2"
    "$BUILD/bin/glm-export" --input "$src" --output "$tmp/free.smd" --quant "$2" --quiet ||
        { bad "$name: the export without a limit failed"; continue; }
    in_cg "$BUILD/bin/glm-export" --input "$src" --output "$tmp/cg.smd" --quant "$2" --quiet
    rc=$?
    peak=$(($(cat "$peakf") >> 20))
    if [ $rc -ne 0 ]; then
        bad "$name: exit $rc inside the ${LIMIT_MB} MiB cgroup (peak $peak MiB)"
    elif [ "$(size_mb "$src")" -lt $((2 * LIMIT_MB)) ] ||
        [ "$(size_mb "$tmp/cg.smd")" -lt $((2 * LIMIT_MB)) ]; then
        bad "$name: the checkpoint or the package is not 2x the limit; the test proves nothing"
    elif ! "$BUILD/bin/glm-export" --verify "$tmp/cg.smd" > /dev/null 2>&1; then
        bad "$name: the package made in the cgroup fails --verify"
    elif ! cmp -s "$tmp/free.smd" "$tmp/cg.smd"; then
        bad "$name: the package made in the cgroup differs from the one made without a limit"
    else
        ok "$name -> $(size_mb "$tmp/cg.smd") MiB package inside a ${LIMIT_MB} MiB cgroup" \
            "(peak $peak MiB), byte-identical to the unconstrained export"
    fi
    rm -f "$tmp/free.smd" "$tmp/cg.smd"
done
echo "export-memory: $pass passed, $fail failed"
[ $fail -eq 0 ]
