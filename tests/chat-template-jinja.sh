#!/bin/sh
# tests/chat-template-jinja.sh: libtx's Jinja renderer (tx/tx_jinja.h)
# against Jinja2, byte for byte (tests/chat-template/check-jinja), over every
# conversation shape of tools/chat-template-check:
#   - the project's own adversarial templates (tests/chat-template/jinja/),
#     the DeepSeek-V3-form template, Qwen3's real template (the Apache-2.0
#     tokenizer_config.json in data/tokenizers/qwen3/);
#   - the synthetic checkpoint of every family glm-synth makes (its
#     chat_template and special tokens);
#   - with TX_CHAT_TEMPLATES=DIR, every .jinja / tokenizer_config-style .json
#     there (the real publishers' templates, which are not committed:
#     tests/chat-template/README.md).
# Then errors: an unsupported construct is named with its line and column,
# raise_exception's message reaches the caller, the step and memory limits
# stop a runaway template. Prints "chat-template-jinja: N passed, N failed".
# Run by `make chat-template-check` and `make check`.
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-build}
T=$B/bin/glm-tokenize
dir=$B/chat-template-jinja
rm -rf "$dir"
mkdir -p "$dir" || exit 1
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "chat-template-jinja: FAIL: $*"; fail=$((fail + 1)); }

DS_BOS='<｜begin▁of▁sentence｜>'
DS_EOS='<｜end▁of▁sentence｜>'
run() { # label check-jinja-args...
	label=$1
	shift
	if python3 tests/chat-template/check-jinja -q --glm-tokenize "$T" "$@"; then ok; else bad "$label"; fi
}
run "own templates" --bos-token "<s>" --eos-token "</s>" tests/chat-template/jinja
run "deepseek3-form" --bos-token "$DS_BOS" --eos-token "$DS_EOS" tests/chat-template/deepseek3-form.jinja
run "qwen3" --prefix data/tokenizers/qwen3/tokenizer_config.json
for spec in "glm4 glm4" "glm5 glm5" "deepseek3 deepseek3" "qwen3moe qwen3moe"; do
	# shellcheck disable=SC2086
	set -- $spec
	if "$B/bin/glm-synth" --arch "$2" --preset tiny --output "$dir/ck-$1" --quiet; then
		run "synthetic $1" --prefix "$dir/ck-$1/tokenizer_config.json"
	else
		bad "glm-synth --arch $2"
	fi
done
if [ -n "${TX_CHAT_TEMPLATES:-}" ]; then
	run "TX_CHAT_TEMPLATES" "$TX_CHAT_TEMPLATES"
else
	echo "chat-template-jinja: the real publishers' templates: SKIP (set TX_CHAT_TEMPLATES=DIR)"
fi

# glm-export: a checkpoint's chat_template.jinja becomes the package's
# chat_template (transformers prefers the file); special_tokens_map.json
# completes the special tokens tokenizer_config.json lacks
if [ -d "$dir/ck-glm4" ]; then
	cp tests/chat-template/jinja/whitespace.jinja "$dir/ck-glm4/chat_template.jinja"
	printf '{"mask_token": "<|mask|>", "eos_token": "<ignored>"}' >"$dir/ck-glm4/special_tokens_map.json"
	if "$B/bin/glm-export" --input "$dir/ck-glm4" --output "$dir/glm4.smd" --quant none --quiet &&
		"$T" --package "$dir/glm4.smd" --print-tokenizer-config >"$dir/glm4-tokcfg.json" &&
		python3 - "$dir/glm4-tokcfg.json" tests/chat-template/jinja/whitespace.jinja <<'PY'
import json, sys
tc = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if tc.get("chat_template") == open(sys.argv[2], encoding="utf-8").read()
         and tc.get("eos_token") != "<ignored>" and tc.get("mask_token") == "<|mask|>" else 1)
PY
	then ok; else bad "glm-export: chat_template.jinja / special_tokens_map.json not stored"; fi
fi

# glm-inference --chat renders with the package's chat_template (Jinja) by
# default: the same prompt and text as libtx's C format of that template
if [ -x "$B/bin/tx8-emu" ] && [ -f "$dir/ck-glm5/config.json" ] &&
	"$B/bin/glm-export" --input "$dir/ck-glm5" --output "$dir/glm5.smd" --quant none --quiet; then
	"$B/bin/tx8-emu" --socket "$dir/emu.sock" --memory 1G --cores 2 2>"$dir/emu.log" &
	emu=$!
	i=0
	while [ ! -S "$dir/emu.sock" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
	gi() {
		timeout 120 "$B/bin/glm-inference" --device "emu:$dir/emu.sock" --checkpoint "$dir/glm5.smd" \
			--no-moe-config --chat -p "hi there" -n 4 --temp 0 "$@" </dev/null
	}
	gi >"$dir/gi-jinja.out" 2>"$dir/gi-jinja.err"
	gi --chat-template glm4.7 >"$dir/gi-c.out" 2>/dev/null
	if grep -q "chat template: the package's chat_template (Jinja)" "$dir/gi-jinja.err" &&
		[ -s "$dir/gi-jinja.out" ] && cmp -s "$dir/gi-jinja.out" "$dir/gi-c.out"; then
		ok
	else
		bad "glm-inference --chat with the package's template: $(tail -n 3 "$dir/gi-jinja.err")"
	fi
	# --chat-template-file: that template instead (a prompt of another length)
	gi --chat-template-file tests/server/chat-template.jinja >/dev/null 2>"$dir/gi-file.err"
	pe() { sed -n 's|.*prompt eval time = .* / *\([0-9]*\) tokens.*|\1|p' "$1"; }
	if grep -q "chat template: tests/server/chat-template.jinja (Jinja)" "$dir/gi-file.err" &&
		[ -n "$(pe "$dir/gi-file.err")" ] && [ "$(pe "$dir/gi-file.err")" != "$(pe "$dir/gi-jinja.err")" ]; then
		ok
	else
		bad "glm-inference --chat-template-file: $(grep -i 'chat\|prompt eval' "$dir/gi-file.err")"
	fi
	kill "$emu" 2>/dev/null
	wait "$emu" 2>/dev/null
else
	echo "chat-template-jinja: glm-inference --chat: SKIP (no tx8-emu or glm5 checkpoint)"
fi

# errors: message (a substring) of rendering template text $2
conv=$dir/conv.json
printf '{"messages": [{"role": "user", "content": "hi"}]}' >"$conv"
expect_error() { # label template-text expected-substring
	printf '%s' "$2" >"$dir/t.jinja"
	out=$("$T" --chat-template-file "$dir/t.jinja" --chat-render "$conv" 2>&1 >/dev/null)
	st=$?
	case $out in
	*"$3"*) if [ $st -eq 1 ]; then ok; else bad "$1: exit status $st"; fi ;;
	*) bad "$1: expected '$3', got '$out'" ;;
	esac
}
expect_error "unsupported tag" 'a
  {% include "x.jinja" %}' "line 2, column 6: unsupported tag '{% include %}'"
expect_error "unsupported filter" '{{ messages | frobnicate }}' "line 1, column 15: unsupported filter 'frobnicate'"
expect_error "unsupported test" '{% if x is weird %}{% endif %}' "line 1, column 12: unsupported test 'weird'"
expect_error "unclosed block" '{% for m in messages %}' "{% endfor %} missing"
expect_error "raise_exception" '{{ raise_exception("roles must alternate: " ~ messages[0].role) }}' \
	"the template raised an exception: roles must alternate: user"
expect_error "step limit" '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}' \
	"step limit"
expect_error "memory limit" '{% set ns = namespace(s="x" * 100000) %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}' \
	"memory limit"
expect_error "sandbox" '{{ messages.append(1) }}' "unsafe"
expect_error "undefined attribute" '{{ nothing.attr }}' "'nothing' is undefined"

echo "chat-template-jinja: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
