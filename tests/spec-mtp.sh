#!/bin/sh
# SPDX-License-Identifier: MIT
# MTP speculative decoding (issue 39, docs/speculative-decoding.md) on the
# trained models: for both (GLM-4.5 GQA, GLM-5.1 MLA + DSA) and k = 1..4,
# greedy output identical to non-speculative decoding; sampled output
# (temperature 0.8, a fixed seed) identical too; --spec-test perfect gives
# acceptance 100% and --spec-test wrong 0%, both with the same output.
set -eu
B=${BUILD:-build}
T=$(mktemp -d)
EMU_PID=
cleanup() { [ -n "$EMU_PID" ] && kill "$EMU_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
"$B/bin/tx8-emu" --socket "$T/emu.sock" --memory 512M --cores 2 2>"$T/emu.log" &
EMU_PID=$!
i=0; while [ ! -S "$T/emu.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
export TX_DEVICE="emu:$T/emu.sock"
P="And God said unto Moses,"
fail=0
run() { m_=$1; shift; "$B/bin/glm-inference" -m "$m_" -p "$P" -n 40 --no-display-prompt "$@" 2>"$T/err"; }
for m in glm45-kjv glm51-kjv; do
    "$B/bin/glm-export" --input "data/models/$m" --output "$T/$m.smd" --quant bf16 --quiet
    pkg="$T/$m.smd"
    run "$pkg" --temp 0 >"$T/ref"
    for k in 1 2 3 4; do
        run "$pkg" --temp 0 --spec-type mtp --draft-max $k >"$T/out"
        if cmp -s "$T/ref" "$T/out"; then echo "ok: $m greedy k=$k: $(grep -o 'acceptance [0-9.]*%' "$T/err")";
        else echo "FAIL: $m greedy k=$k differs"; fail=1; fi
    done
    run "$pkg" --temp 0.8 -s 7 >"$T/sref"
    run "$pkg" --temp 0.8 -s 7 --spec-type mtp --draft-max 2 >"$T/out"
    if cmp -s "$T/sref" "$T/out"; then echo "ok: $m sampled k=2 identical";
    else echo "FAIL: $m sampled output differs"; fail=1; fi
    for t in perfect:100.0 wrong:0.0; do
        run "$pkg" --temp 0 --spec-type mtp --draft-max 3 --spec-test "${t%%:*}" >"$T/out"
        a=$(grep -o 'acceptance [0-9.]*%' "$T/err" || true)
        if cmp -s "$T/ref" "$T/out" && [ "$a" = "acceptance ${t##*:}%" ]; then echo "ok: $m ${t%%:*}: $a";
        else echo "FAIL: $m --spec-test ${t%%:*}: $a"; fail=1; fi
    done
done
exit $fail
