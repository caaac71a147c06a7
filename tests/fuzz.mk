# Fuzz targets (clang + libFuzzer); not part of `all` or `tests`.
#
#   make fuzz-build                 every target: $(BUILD)/fuzz/fuzz_NAME
#   make fuzz [FUZZ_TIME=60]        build, then fuzz every target for
#                                   FUZZ_TIME seconds, starting from its
#                                   committed corpus tests/fuzz/corpus/NAME/
#                                   (replayed first); new inputs go to
#                                   $(BUILD)/fuzz/corpus-NAME, findings to
#                                   $(BUILD)/fuzz/findings-NAME/; prints a
#                                   table and "fuzz: N passed, N failed"
#   make fuzz FUZZ_TARGETS=fuzz_smd one target (or a list)
#   make fuzz-NAME                  build one target (fuzz-tokenizer, ...)
#
# Every target is tests/fuzz/fuzz_NAME.c. It links libtx-fuzz.a: ALL of
# libtx, the compute engine and the device model's library part, compiled
# by clang with coverage (-fsanitize=fuzzer-no-link) and ASan/UBSan, so the
# fuzzer sees edges in whatever code an input reaches, not only in the
# target's own file. `make check` runs `make fuzz` for a short time
# (tests/check). See tests/fuzz/README.md.

FUZZ_CC      ?= clang
FUZZ_TIME    ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_ALL     := $(sort $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c))))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=c11 -g -O1 -pthread -fno-omit-frame-pointer $(FUZZ_SAN) \
                -fsanitize=fuzzer-no-link -MMD -MP
FUZZ_LIB_SRCS = $(LIBTX_SRCS) $(LIBTX_GEN_SRCS) $(TXTOOLS_SRCS) $(ENGINE_SRCS) \
                $(filter-out emu/server/main.c,$(EMU_SRCS))
FUZZ_LIB_OBJS = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_LIB     := $(FUZZ_DIR)/libtx-fuzz.a
FUZZ_BINS    := $(addprefix $(FUZZ_DIR)/,$(FUZZ_ALL))

$(FUZZ_DIR)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(FUZZ_CFLAGS) $(SIMD_AVX512) -c -o $@ $<

$(FUZZ_DIR)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(FUZZ_CFLAGS) $(SIMD_AVX2) -c -o $@ $<

$(FUZZ_DIR)/obj/%_amx_hw.o: %_amx_hw.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(FUZZ_CFLAGS) $(SIMD_AVX512) $(SIMD_AMX) -c -o $@ $<

$(FUZZ_DIR)/obj/%_amx_emu.o: %_amx_emu.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(FUZZ_CFLAGS) $(SIMD_AVX512) -c -o $@ $<

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(FUZZ_CFLAGS) -c -o $@ $<

# the generated ONNX code exists before anything includes its header
$(filter $(FUZZ_DIR)/obj/libtx/model/%,$(FUZZ_LIB_OBJS)): $(ONNX_GEN_H)

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BINS): $(FUZZ_DIR)/%: tests/fuzz/%.c $(FUZZ_LIB)
	$(FUZZ_CC) $(CPPFLAGS) $(TEST_CPPFLAGS) -Itests/fuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(FUZZ_LIB) $(LIBTX_LIBS) $(ENGINE_LIBS) -lm

fuzz-build:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || \
		{ echo "fuzz: $(FUZZ_CC) not found (scripts/install-deps installs clang)"; exit 1; }
	@$(MAKE) --no-print-directory $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))

# fuzz_smd_load starts $(BUILD)/bin/tx8-emu (tests/unit/tx_test_emu.h)
$(FUZZ_DIR)/fuzz_smd_load: | $(BUILD)/bin/tx8-emu

fuzz: fuzz-build
	@BUILD=$(BUILD) tests/fuzz/run --dir $(FUZZ_DIR) --time $(FUZZ_TIME) $(FUZZ_TARGETS)

# make fuzz-tokenizer, fuzz-smd, ...: build one target
$(addprefix fuzz-,$(patsubst fuzz_%,%,$(FUZZ_ALL))): fuzz-%: $(FUZZ_DIR)/fuzz_%

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)

.PHONY: fuzz fuzz-build $(addprefix fuzz-,$(patsubst fuzz_%,%,$(FUZZ_ALL)))
