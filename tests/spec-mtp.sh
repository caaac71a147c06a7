#!/bin/sh
# SPDX-License-Identifier: MIT
# MTP speculative decoding (issue 39, docs/speculative-decoding.md) on the
# trained models: for both (GLM-4.5 GQA, GLM-5.1 MLA + DSA) and k = 1..4,
# greedy output identical to non-speculative decoding; sampled output
# (temperature 0.8, a fixed seed) identical too; --spec-test perfect gives
# acceptance 100% and --spec-test wrong 0%, both with the same output;
# with the expert cache and on two devices. Synthetic models of the three
# architectures with an MTP layer (glm-synth --mtp-layer, random weights:
# the adaptive switch-off engages) under every precision plan and the KV
# cache types (rollback of f32/f16/bf16/q8_0/q4_0 caches): greedy output
# identical with the MTP drafts and with --spec-test perfect.
# Prints "spec-mtp: N passed, N failed, N skipped".
set -eu
B=${BUILD:-build}
T=$(mktemp -d)
EMU_PID=
EMU2_PID=
cleanup() {
    [ -n "$EMU_PID" ] && kill "$EMU_PID" 2>/dev/null
    [ -n "$EMU2_PID" ] && kill "$EMU2_PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
"$B/bin/tx8-emu" --socket "$T/emu.sock" --memory 512M --cores 2 2>"$T/emu.log" &
EMU_PID=$!
"$B/bin/tx8-emu" --socket "$T/emu2.sock" --memory 512M --cores 1 2>"$T/emu2.log" &
EMU2_PID=$!
i=0; while { [ ! -S "$T/emu.sock" ] || [ ! -S "$T/emu2.sock" ]; } && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
export TX_DEVICE="emu:$T/emu.sock"
P="And God said unto Moses,"
fail=0
npass=0
nfail=0
nskip=0
ok() { echo "ok: $*"; npass=$((npass + 1)); }
bad() { echo "FAIL: $*"; nfail=$((nfail + 1)); fail=1; }
skp() { echo "skip: $*"; nskip=$((nskip + 1)); }
run() { m_=$1; shift; "$B/bin/glm-inference" -m "$m_" -p "$P" -n 40 --no-display-prompt "$@" 2>"$T/err"; }
same() { # same NAME: $T/ref vs $T/out
    if cmp -s "$T/ref" "$T/out"; then ok "$1: $(grep -o 'acceptance [0-9.]*%' "$T/err" || true)";
    else bad "$1 differs from non-speculative"; sed -n '$p' "$T/err"; fail=1; fi
}
for m in glm45-kjv glm51-kjv; do
    "$B/bin/glm-export" --input "data/models/$m" --output "$T/$m.smd" --quant bf16 --quiet
    pkg="$T/$m.smd"
    run "$pkg" --temp 0 >"$T/ref"
    for k in 1 2 3 4; do
        run "$pkg" --temp 0 --spec-type mtp --draft-max $k >"$T/out"
        if cmp -s "$T/ref" "$T/out"; then ok "$m greedy k=$k: $(grep -o 'acceptance [0-9.]*%' "$T/err")";
        else bad "$m greedy k=$k differs"; fail=1; fi
    done
    run "$pkg" --temp 0.8 -s 7 >"$T/sref"
    run "$pkg" --temp 0.8 -s 7 --spec-type mtp --draft-max 2 >"$T/out"
    if cmp -s "$T/sref" "$T/out"; then ok "$m sampled k=2 identical";
    else bad "$m sampled output differs"; fail=1; fi
    for t in perfect:100.0 wrong:0.0; do
        run "$pkg" --temp 0 --spec-type mtp --draft-max 3 --spec-test "${t%%:*}" >"$T/out"
        a=$(grep -o 'acceptance [0-9.]*%' "$T/err" || true)
        if cmp -s "$T/ref" "$T/out" && [ "$a" = "acceptance ${t##*:}%" ]; then ok "$m ${t%%:*}: $a";
        else bad "$m --spec-test ${t%%:*}: $a"; fail=1; fi
    done
done
# composition: the expert cache, two devices
pkg="$T/glm51-kjv.smd"
run "$pkg" --temp 0 >"$T/ref"
run "$pkg" --temp 0 --spec-type mtp --draft-max 3 --expert-cache 1M >"$T/out"
same "glm51-kjv expert cache k=3"
run "$pkg" --temp 0 --device "emu:$T/emu.sock,emu:$T/emu2.sock" >"$T/ref"
run "$pkg" --temp 0 --device "emu:$T/emu.sock,emu:$T/emu2.sock" --spec-type mtp --draft-max 3 >"$T/out"
same "glm51-kjv two devices k=3"
# MPI: two ranks, one device each (skipped without mpirun or an MPI build)
if command -v mpirun >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    timeout 300 mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
        --mca oob_tcp_if_include lo -np 2 "$B/bin/glm-inference" -m "$pkg" -p "$P" -n 40 \
        --no-display-prompt --temp 0 --device "emu:$T/emu.sock,emu:$T/emu2.sock" \
        --spec-type mtp --draft-max 3 >"$T/out" 2>"$T/err" || true
    if grep -q "rank 0 of 2: speculative decoding" "$T/err"; then same "glm51-kjv mpirun -np 2 k=3";
    else skp "mpirun -np 2: $(sed -n '$p' "$T/err")"; fi
else
    skp "mpirun -np 2: no mpirun"
fi
for kv in q8_0 q4_0 bf16; do # the latent MLA cache in the quantised types
    run "$pkg" --temp 0 --cache-type-k $kv >"$T/ref"
    run "$pkg" --temp 0 --cache-type-k $kv --spec-type mtp --draft-max 3 >"$T/out"
    same "glm51-kjv latent cache $kv k=3"
done

# the chat (-cnv): two turns reusing the KV cache, replies as without drafts
printf 'And God said\nAnd Moses said\n/exit\n' | "$B/bin/glm-inference" -m "$pkg" -cnv -n 24 --temp 0 >"$T/ref" 2>"$T/err"
printf 'And God said\nAnd Moses said\n/exit\n' | "$B/bin/glm-inference" -m "$pkg" -cnv -n 24 --temp 0 \
    --spec-type mtp --draft-max 3 >"$T/out" 2>"$T/err"
same "glm51-kjv chat, two turns, k=3"
# glm-server --spec-type mtp: two requests decoded together (one arriving
# while the other decodes), texts as without drafts, the /metrics counters
serve() { # serve OUT ARGS...: two completions through a server started with ARGS
    out_=$1; shift
    "$B/bin/glm-server" -m "$pkg" --port 0 -np 2 "$@" >"$T/srv.log" 2>&1 &
    spid=$!
    port=
    i=0; while [ -z "$port" ] && [ $i -lt 100 ]; do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$T/srv.log"); sleep 0.1; i=$((i + 1)); done
    curl -s "localhost:$port/v1/completions" -d '{"prompt":"And God said unto Moses,","max_tokens":40,"temperature":0}' >"$out_.1" &
    cpid=$!
    curl -s "localhost:$port/v1/completions" -d '{"prompt":"In the beginning","max_tokens":40,"temperature":0.8,"seed":5}' >"$out_.2"
    wait $cpid
    curl -s "localhost:$port/metrics" >"$out_.m"
    kill $spid; wait $spid 2>/dev/null || true
    if grep -q "Sanitizer\|runtime error" "$T/srv.log"; then
        bad "glm-server $*: $(grep -m1 "Sanitizer\|runtime error" "$T/srv.log")"; fail=1
    fi
}
text() { sed 's/.*"text": *"\([^"]*\)".*/\1/' "$1"; }
serve "$T/plain"
serve "$T/spec" --spec-type mtp --draft-max 3
for r in 1 2; do
    if [ -s "$T/plain.$r" ] && [ "$(text "$T/plain.$r")" = "$(text "$T/spec.$r")" ]; then ok "glm-server request $r: same text";
    else bad "glm-server request $r: $(cat "$T/spec.$r")"; fail=1; fi
done
d=$(sed -n 's/^glm_server_spec_decode_num_draft_tokens_total //p' "$T/spec.m")
a=$(sed -n 's/^glm_server_spec_decode_num_accepted_tokens_total //p' "$T/spec.m")
if [ "${d:-0}" -gt 0 ] && [ "${a:-0}" -gt 0 ] && [ "$a" -le "$d" ]; then ok "glm-server /metrics: $a of $d drafts accepted";
else bad "glm-server /metrics: drafted '$d' accepted '$a'"; fail=1; fi

# synthetic models, every architecture with an MTP layer, plans and KV types
for a in glm4 glm5 deepseek3; do
    "$B/bin/glm-synth" --arch $a --preset tiny --mtp-layer --output "$T/s-$a" --quiet
    "$B/bin/glm-export" --input "$T/s-$a" --output "$T/s-$a.smd" --quiet
    for plan in golden fp32 fp16 bf16 int8; do
        for kv in default f32 q8_0 q4_0; do
            case "$plan:$kv" in golden:* | *:default) ;; *) continue ;; esac
            ctk=; [ "$kv" = default ] || ctk="--cache-type-k $kv --cache-type-v $kv"
            # shellcheck disable=SC2086
            if ! run "$T/s-$a.smd" --temp 0 --precision $plan $ctk >"$T/ref"; then
                skp "synthetic $a plan $plan KV $kv: $(sed -n '$p' "$T/err")"
                continue
            fi
            for mode in mtp perfect; do
                t=; [ $mode = perfect ] && t="--spec-test perfect"
                # shellcheck disable=SC2086
                run "$T/s-$a.smd" --temp 0 --precision $plan $ctk --spec-type mtp --draft-max 2 $t >"$T/out"
                same "synthetic $a plan $plan KV $kv drafts $mode"
            done
        done
    done
done
echo "spec-mtp: $npass passed, $nfail failed, $nskip skipped"
exit $fail
