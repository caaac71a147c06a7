#!/bin/sh
# tests/chat-template-check.sh: the chat-template reference check
# (tools/chat-template-check, docs/glm-inference.md) on a synthetic package
# of every family: glm4_moe with the GLM-4.5 form and with the GLM-4.7 form
# of the project's own templates, glm_moe_dsa, deepseek_v3 (with its
# GLM-5-form synthetic template, and with the DeepSeek-V3-form template of
# tests/chat-template/deepseek3-form.jinja), qwen3_moe; every conversation
# shape, the tool shapes (tool definitions, tool calls, results) too. Each
# package's chat_template is rendered with Jinja2 and compared byte for
# byte with libtx's rendering; prints "chat-template: N passed, N failed"
# (one per package). Then libtx against the golden renderings of the real
# published templates (tests/chat-template/check-reference, README.md there).
# Run by `make chat-template-check` and `make check`.
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-build}
dir=$B/chat-template-check
rm -rf "$dir"
mkdir -p "$dir" || exit 1
pass=0
fail=0

# make NAME ARCH [NAME2 | FILE.jinja]: package NAME of a tiny ARCH
# checkpoint; with NAME2, its chat_template replaced by NAME2's (already
# made), with FILE.jinja by the text of that file
make_pkg() {
	"$B/bin/glm-synth" --arch "$2" --preset tiny --output "$dir/ck-$1" --quiet || return 1
	if [ -n "${3:-}" ]; then
		src=$dir/ck-$3/tokenizer_config.json
		case $3 in *.jinja) src=$3 ;; esac
		python3 - "$dir/ck-$1/tokenizer_config.json" "$src" <<'PY' || return 1
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
with open(sys.argv[2], encoding="utf-8") as f:
    if sys.argv[2].endswith(".jinja"):
        d["chat_template"] = f.read()
    else:
        d["chat_template"] = json.load(f)["chat_template"]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(d, f, ensure_ascii=False, indent=2)
PY
	fi
	"$B/bin/glm-export" --input "$dir/ck-$1" --output "$dir/$1.smd" --quant none --quiet
}

for spec in "glm4.5 glm4" "glm5 glm5" "glm4.7 glm4 glm5" "deepseek3 deepseek3" "qwen3 qwen3moe" \
	"deepseek3-form deepseek3 tests/chat-template/deepseek3-form.jinja"; do
	# shellcheck disable=SC2086
	set -- $spec
	if ! make_pkg "$@"; then
		echo "chat-template: $1: cannot make the synthetic package"
		fail=$((fail + 1))
		continue
	fi
	if python3 tools/chat-template-check/chat-template-check -q \
		--glm-tokenize "$B/bin/glm-tokenize" "$dir/$1.smd"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
	fi
done
# the check is not vacuous: a GLM-4.5 template that renders one byte more
# (a space after the system marker) is still recognised as GLM-4.5 and must
# be reported as a difference
if "$B/bin/glm-synth" --arch glm4 --preset tiny --output "$dir/ck-bad" --quiet &&
	python3 - "$dir/ck-bad/tokenizer_config.json" <<'PY' &&
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
t = d["chat_template"]
assert "'<|system|>\\n'" in t
d["chat_template"] = t.replace("'<|system|>\\n'", "'<|system|>\\n '")
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(d, f, ensure_ascii=False, indent=2)
PY
	"$B/bin/glm-export" --input "$dir/ck-bad" --output "$dir/bad.smd" --quant none --quiet; then
	python3 tools/chat-template-check/chat-template-check -q --glm-tokenize "$B/bin/glm-tokenize" \
		"$dir/bad.smd" > "$dir/bad.out" 2>&1
	rc=$?
	if [ "$rc" -eq 1 ] && grep -q "system + user: DIFF at byte 23" "$dir/bad.out"; then
		echo "chat-template: a template differing by one byte is reported (exit 1):"
		grep "DIFF" "$dir/bad.out" | head -n 2 | sed 's/^/  /'
		pass=$((pass + 1))
	else
		echo "chat-template: a template differing by one byte was NOT reported (exit $rc):"
		sed 's/^/  /' "$dir/bad.out"
		fail=$((fail + 1))
	fi
else
	echo "chat-template: cannot make the altered package"
	fail=$((fail + 1))
fi
# libtx against the goldens rendered from the REAL published templates
# (tests/chat-template/reference, tests/chat-template/make-reference); no
# Jinja2 needed. TX_CHAT_TEMPLATES=DIR also checks that the real template
# files found there are recognised as their family.
if python3 tests/chat-template/check-reference --glm-tokenize "$B/bin/glm-tokenize" \
	> "$dir/reference.out" 2>&1; then
	grep -v "DIFF\|^  " "$dir/reference.out" | sed 's/^/chat-template: /'
	pass=$((pass + 1))
else
	sed 's/^/chat-template: /' "$dir/reference.out"
	fail=$((fail + 1))
fi
# the golden check is not vacuous: a golden that differs by one byte from
# libtx's rendering (one changed byte of the Qwen3 generation prompt) fails
rm -rf "$dir/ref-bad"
cp -r tests/chat-template/reference "$dir/ref-bad" &&
	python3 - "$dir/ref-bad/qwen3/01-user.txt" <<'PY'
import sys
p = sys.argv[1]
with open(p, "rb") as f:
    b = f.read()
assert b.endswith(b"assistant\n")
with open(p, "wb") as f:
    f.write(b[:-1] + b" ")
PY
python3 tests/chat-template/check-reference --glm-tokenize "$B/bin/glm-tokenize" \
	--reference "$dir/ref-bad" qwen3 > "$dir/ref-bad.out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "qwen3: 01-user: DIFF at byte 51" "$dir/ref-bad.out"; then
	echo "chat-template: a golden differing by one byte is reported (exit 1):"
	grep "DIFF" "$dir/ref-bad.out" | sed 's/^/  /'
	pass=$((pass + 1))
else
	echo "chat-template: a golden differing by one byte was NOT reported (exit $rc):"
	sed 's/^/  /' "$dir/ref-bad.out"
	fail=$((fail + 1))
fi
echo "chat-template: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
