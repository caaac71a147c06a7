# TX8 stack: top-level build.
#
#   make            build all user-space parts into build/
#   make run        install missing packages, build, run the main demo
#   make check      install missing packages, run every test suite
#   make install    PREFIX=/usr/local DESTDIR=
#   make module     build tx8.ko against KDIR (guest kernel headers)
#
# Sources are found by directory: every .c under libtx/ is part of libtx,
# every .c under tools/lib/ part of libtx-tools.a, every .c under emu/engine/ part of the device's compute engine, every
# directory tools/NAME/ is the program build/bin/NAME, every
# tests/unit/test_*.c a Check test program. Sub-makefiles (*/*.mk) add
# per-part settings.

BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?= 0

CC      ?= cc
PKGS    := liburing libdrm libpcre2-8 libutf8proc yaml-0.1 json-c libprotobuf-c
# Include paths are per part (docs/libtx-abi.md, "Layering"): everything sees
# include/ (the installed SDK headers); libtx objects add -Ilibtx and
# -Ilibtx/include (the private converter and format headers, <tx/tx_smd.h>
# ...), the emulator -Iemu, the tools their private headers tools/include/
# and libtx/include, the tests what they test (TEST_CPPFLAGS).
CPPFLAGS += -Iinclude -D_GNU_SOURCE \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBTX_CPPFLAGS  := -Ilibtx -Ilibtx/include -I$(BUILD)/gen
EMU_CPPFLAGS    := -Iemu
TOOLS_CPPFLAGS  := -Itools/include -Ilibtx/include
TEST_CPPFLAGS   := $(LIBTX_CPPFLAGS) $(EMU_CPPFLAGS) $(TOOLS_CPPFLAGS)
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -fPIC -pthread \
           -fvisibility=hidden -MMD -MP
LDFLAGS += -pthread
LDLIBS  += -lm

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=all \
           -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

# Soname rules: docs/libtx-abi.md. The exported symbols are exactly those
# of libtx/libtx.map (checked against the installed headers by
# tests/check-abi).
LIBTX_SOVERSION := 2
LIBTX_VERSION   := 2.9.0
LIBTX_MAP       := libtx/libtx.map

# The SDK: the headers `make install` installs (all of include/tx/; the
# private headers of the converter and the format parsers are in
# libtx/include/tx/, reached by -Ilibtx/include for libtx, the tools and the
# tests only, never installed).
SDK_HEADERS := $(addprefix include/tx/,tx.h tx_error.h tx_dtype.h tx_device.h \
               tx_tokenizer.h tx_jinja.h glm.h glm_config.h tx_telemetry.h tx_profile.h)

# SIMD kernels are compiled per file: *_avx512.c, *_avx2.c. Families that
# not every CPU of a level has (AVX512-BF16) are not in the flags: the
# functions using them carry a target attribute and are reached only after a
# CPUID check (emu/engine/engine.c).
SIMD_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni \
               -mfma -mf16c -mavx2
SIMD_AVX2   := -mavx2 -mfma -mf16c
# The AMX tile instructions: only emu/engine/kern_amx_hw.c (reached after
# the CPUID and arch_prctl checks of emu/engine/engine.c); it and the
# emulated build kern_amx_emu.c also use AVX-512 (they run only on
# AVX-512 engines).
SIMD_AMX    := -mamx-tile -mamx-int8 -mamx-bf16

all:

# ---------------------------------------------------------------------------
# Part lists (sub-makefiles may append)

# libtx-tools.a: what the tools and tests share that is not the SDK -- the
# tools' helpers and the converter-only code (checkpoint synthesis,
# analysis, export), all in tools/lib/. Static, private, never installed.
ENGINE_SRCS := $(sort $(wildcard emu/engine/*.c))
EMU_SRCS    := $(sort $(wildcard emu/server/*.c))
LIBTX_SRCS  := $(sort $(shell find libtx -name '*.c' 2>/dev/null))
TOOLS       := $(filter-out lib,$(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tools/*/*.c))))))
TXTOOLS_SRCS := $(sort $(wildcard tools/lib/*.c))
UNIT_TESTS  := $(sort $(basename $(notdir $(wildcard tests/unit/test_*.c))))
LIBTX_GEN_SRCS :=
ENGINE_LIBS := -lnuma
LIBTX_LIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
TOOL_LIBS   :=
CHECK_LIBS  := $(shell pkg-config --libs check 2>/dev/null)

-include $(sort $(wildcard */*.mk))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

ENGINE_OBJS := $(call obj,$(ENGINE_SRCS))
EMU_OBJS    := $(call obj,$(EMU_SRCS))
LIBTX_OBJS  := $(call obj,$(LIBTX_SRCS) $(LIBTX_GEN_SRCS))
TXTOOLS_OBJS := $(call obj,$(TXTOOLS_SRCS))

ENGINE_A := $(BUILD)/lib/libtx8engine.a
LIBTX_A  := $(BUILD)/lib/libtx.a
TXTOOLS_A := $(BUILD)/lib/libtx-tools.a
LIBTX_SO := $(BUILD)/lib/libtx.so.$(LIBTX_VERSION)
LIBTX_PC := $(BUILD)/lib/pkgconfig/libtx.pc
LIBTX_UPC := $(BUILD)/lib/pkgconfig/libtx-uninstalled.pc
BINS     := $(BUILD)/bin/tx8-emu $(addprefix $(BUILD)/bin/,$(TOOLS))
UNIT_BINS := $(addprefix $(BUILD)/tests/,$(UNIT_TESTS))

all: $(ENGINE_A) $(LIBTX_A) $(TXTOOLS_A) $(LIBTX_SO) $(LIBTX_PC) $(LIBTX_UPC) $(BINS)
tests: $(UNIT_BINS)

# ---------------------------------------------------------------------------
# Compilation

# per-part include paths (target-specific: they apply to these objects only)
$(BUILD)/obj/libtx/%.o $(BUILD)/obj/$(BUILD)/gen/%.o: CPPFLAGS += $(LIBTX_CPPFLAGS)
$(BUILD)/obj/emu/%.o: CPPFLAGS += $(EMU_CPPFLAGS)
$(BUILD)/obj/tools/%.o: CPPFLAGS += $(TOOLS_CPPFLAGS)
# tools/lib/ is the tools' library on top of libtx's internals
$(BUILD)/obj/tools/lib/%.o: CPPFLAGS += $(LIBTX_CPPFLAGS)
# tx-bench measures the compute engine (it links libtx8engine.a) directly;
# the host cache probe is the private <tx/tx_cpu_cache.h> (libtx/include)
$(BUILD)/obj/tools/tx-bench/%.o: CPPFLAGS += $(EMU_CPPFLAGS)
# --version (tools/lib/version.c): the release and the git commit, rebuilt
# when HEAD moves ($(BUILD)/gen/git-commit changes only then)
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
$(BUILD)/gen/git-commit: FORCE
	@mkdir -p $(dir $@)
	@echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' > $@
$(BUILD)/obj/tools/lib/version.o: $(BUILD)/gen/git-commit
$(BUILD)/obj/tools/lib/version.o: CPPFLAGS += -DTXC_VERSION='"$(LIBTX_VERSION)"' \
	-DTXC_GIT_COMMIT='"$(GIT_COMMIT)"'
$(BUILD)/obj/emu/server/main.o: $(BUILD)/gen/git-commit
$(BUILD)/obj/emu/server/main.o: CPPFLAGS += -DTX8_EMU_VERSION='"$(LIBTX_VERSION)"' \
	-DTX8_EMU_GIT_COMMIT='"$(GIT_COMMIT)"'
.PHONY: FORCE
FORCE:

$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SIMD_AVX512) -c -o $@ $<

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SIMD_AVX2) -c -o $@ $<

$(BUILD)/obj/%_amx_hw.o: %_amx_hw.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SIMD_AVX512) $(SIMD_AMX) -c -o $@ $<

$(BUILD)/obj/%_amx_emu.o: %_amx_emu.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SIMD_AVX512) -c -o $@ $<

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(ENGINE_A): $(ENGINE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# (the libraries also depend on the Makefile: a file moved between libtx
# and libtx-tools.a changes their member lists, not any object)
$(LIBTX_A): $(LIBTX_OBJS) Makefile
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIBTX_OBJS)

$(TXTOOLS_A): $(TXTOOLS_OBJS) Makefile
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(TXTOOLS_OBJS)

# The exported symbols are pinned by the version script (docs/libtx-abi.md).
$(LIBTX_SO): $(LIBTX_OBJS) $(LIBTX_MAP) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libtx.so.$(LIBTX_SOVERSION) \
		-Wl,--version-script=$(LIBTX_MAP) \
		-Wl,--no-undefined -o $@ $(LIBTX_OBJS) $(LIBTX_LIBS) $(LDLIBS)
	ln -sf libtx.so.$(LIBTX_VERSION) $(BUILD)/lib/libtx.so.$(LIBTX_SOVERSION)
	ln -sf libtx.so.$(LIBTX_SOVERSION) $(BUILD)/lib/libtx.so

$(LIBTX_PC): libtx/libtx.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(LIBTX_VERSION)|g' \
	    -e 's|@PRIVATE_LIBS@|$(LIBTX_LIBS) -lm -pthread|g' $< > $@

# The pkg-config convention for building against an uninstalled tree
# (pkg-config prefers NAME-uninstalled.pc when PKG_CONFIG_PATH has it):
#   PKG_CONFIG_PATH=$(BUILD)/lib/pkgconfig pkg-config --cflags --libs libtx-uninstalled
# gives this tree's include/ and $(BUILD)/lib, with an rpath to
# $(BUILD)/lib so the program finds libtx.so.2 without LD_LIBRARY_PATH
# (docs/libtx.md, "Building against the tree").
$(LIBTX_UPC): libtx/libtx.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|^prefix=.*|prefix=$(CURDIR)|' -e 's|^libdir=.*|libdir=$(abspath $(BUILD))/lib|' \
	    -e 's|^includedir=.*|includedir=$${prefix}/include|' \
	    -e 's|@VERSION@|$(LIBTX_VERSION)|g' \
	    -e 's|^Libs: .*|Libs: -L$${libdir} -Wl,-rpath,$${libdir} -ltx|' \
	    -e 's|^Description: \(.*\)|Description: \1, uninstalled build tree|' \
	    -e 's|@PRIVATE_LIBS@|$(LIBTX_LIBS) -lm -pthread|g' $< > $@

$(BUILD)/bin/tx8-emu: $(EMU_OBJS) $(ENGINE_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(EMU_OBJS) $(ENGINE_A) $(ENGINE_LIBS) $(LDLIBS)

# Tools link libtx-tools.a and libtx statically (one self-contained binary
# each, easy to copy into the VM image) plus the engine for tools that
# drive it directly.
define tool_rule
$(1)_OBJS := $$(call obj,$$(sort $$(wildcard tools/$(1)/*.c)))
$(BUILD)/bin/$(1): $$($(1)_OBJS) $(TXTOOLS_A) $(LIBTX_A) $(ENGINE_A)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$($(1)_OBJS) $(TXTOOLS_A) $(LIBTX_A) $(ENGINE_A) \
		$$(TOOL_LIBS) $$($(1)_LIBS) $(LIBTX_LIBS) $(ENGINE_LIBS) $(LDLIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))
# tuna embeds its page script (tools/tuna/report_js.c: .incbin)
$(BUILD)/obj/tools/tuna/report_js.o: tools/tuna/report.js

# Check unit tests link libtx-tools.a, libtx.a and the engine; they see the
# internals they test (TEST_CPPFLAGS); tests/unit/*.h helpers are shared
# by including them.
$(BUILD)/tests/%: tests/unit/%.c $(TXTOOLS_A) $(LIBTX_A) $(ENGINE_A) $(BINS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) -Itests/unit $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(TXTOOLS_A) $(LIBTX_A) $(ENGINE_A) $(CHECK_LIBS) $(LIBTX_LIBS) \
		$(ENGINE_LIBS) $(LDLIBS)

# ---------------------------------------------------------------------------
# Tests

# Unit and emulator-backed tests of one build tree (BUILD=...).
unit-check: all tests
	@BUILD=$(BUILD) tests/run-unit $(UNIT_BINS)

# The exported symbols of libtx.so are exactly the SDK (docs/libtx-abi.md).
abi-check: $(LIBTX_SO)
	@SDK_HEADERS="$(SDK_HEADERS)" tests/abi/check-abi $(BUILD)

# The layout of every public struct against tests/abi/layout.txt: the
# append-only rule (docs/libtx-abi.md, "Layout snapshot").
layout-check:
	@SDK_HEADERS="$(SDK_HEADERS)" tests/abi/check-layout

print-sdk-headers:
	@echo $(SDK_HEADERS)

# The chat-template reference check on the synthetic package of every family
# (tests/chat-template-check.sh, tools/chat-template-check; needs Jinja2).
chat-template-check: $(BUILD)/bin/glm-synth $(BUILD)/bin/glm-export $(BUILD)/bin/glm-tokenize \
		$(BUILD)/bin/glm-inference $(BUILD)/bin/tx8-emu
	@BUILD=$(BUILD) tests/chat-template-check.sh
	@BUILD=$(BUILD) tests/chat-template-jinja.sh

# glm-export inside a memory cgroup smaller than its input and output
# (FP8 and BF16 checkpoints): the same bytes as without a limit
# (tests/export-memory.sh; SKIP without root or a memory cgroup)
export-memory-check: $(BUILD)/bin/glm-export $(BUILD)/bin/glm-synth
	@BUILD=$(BUILD) tests/export-memory.sh

# MTP speculative decoding on the trained models: greedy and sampled output
# identical to non-speculative, acceptance 100%/0% test modes (tests/spec-mtp.sh)
spec-mtp-check: $(BUILD)/bin/glm-export $(BUILD)/bin/glm-inference $(BUILD)/bin/tx8-emu
	@BUILD=$(BUILD) tests/spec-mtp.sh

# MTP speculative decoding's tg speed-up on the trained GLM-5.1 (glm-inference
# --bench-spec: k = 1..4 vs non-speculative, depths 0 and 2048, one run)
bench-mtp: $(BUILD)/bin/glm-export $(BUILD)/bin/glm-inference $(BUILD)/bin/tx8-emu
	@BUILD=$(BUILD) scripts/bench-mtp

check:
	@scripts/install-deps
	@MAKE="$(MAKE)" tests/check

run:
	@scripts/install-deps
	$(MAKE) all
	@scripts/demo

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/include/tx $(DESTDIR)$(PREFIX)/include/tx8
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 tools/chat-template-check/chat-template-check $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBTX_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBTX_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtx.so.$(LIBTX_VERSION) \
		$(DESTDIR)$(PREFIX)/lib/libtx.so.$(LIBTX_SOVERSION)
	ln -sf libtx.so.$(LIBTX_SOVERSION) $(DESTDIR)$(PREFIX)/lib/libtx.so
	install -m 644 $(LIBTX_PC) $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 644 $(SDK_HEADERS) $(DESTDIR)$(PREFIX)/include/tx/
	install -m 644 include/tx8/*.h $(DESTDIR)$(PREFIX)/include/tx8/
	install -d $(DESTDIR)$(PREFIX)/share/tx8/tokenizers/qwen3
	install -m 644 data/tokenizers/qwen3/tokenizer.json \
		data/tokenizers/qwen3/tokenizer_config.json \
		data/tokenizers/qwen3/NOTICE data/tokenizers/qwen3/LICENSE.* \
		$(DESTDIR)$(PREFIX)/share/tx8/tokenizers/qwen3/
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/doc/tx8
	sed -e 's|@PREFIX@|$(PREFIX)|g' config/glm-server.service.in \
		> $(DESTDIR)$(PREFIX)/lib/systemd/system/glm-server.service
	install -m 644 docs/glm-server.md $(DESTDIR)$(PREFIX)/share/doc/tx8/

clean:
	rm -rf build build-san

format:
	clang-format -i $$(git ls-files '*.c' '*.h' | grep -v '^kernel/\|^include/uapi/\|^include/tx8/')

.PHONY: all tests check unit-check abi-check layout-check chat-template-check export-memory-check spec-mtp-check bench-mtp print-sdk-headers run install clean format 

-include $(shell find $(BUILD)/obj $(BUILD)/tests -name '*.d' 2>/dev/null)
