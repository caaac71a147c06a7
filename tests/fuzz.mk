# Fuzz targets (clang + libFuzzer); not part of `all` or `tests`.
#
#   make BUILD=build-x fuzz-tokenizer              build the libFuzzer binary
#   make BUILD=build-x fuzz-tokenizer-run [FUZZ_TIME=60]
#                                                  fuzz for FUZZ_TIME seconds,
#                                                  new inputs go to
#                                                  $(BUILD)/fuzz/corpus-tokenizer
#   make BUILD=build-x fuzz-tokenizer-replay       gcc build of the same target
#                                                  with a main() that replays
#                                                  files (no clang needed)
#
# The committed seed corpus is tests/fuzz/corpus/tokenizer/; the unit test
# test_tokenizer replays it on every run. See tests/fuzz/README.md.

FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TOK_SRCS := $(sort $(wildcard libtx/tokenizer/*.c)) libtx/common/error.c \
                 tests/fuzz/fuzz_tokenizer.c
FUZZ_TOK_DEPS := $(FUZZ_TOK_SRCS) $(wildcard libtx/tokenizer/*.h) include/tx/tx_tokenizer.h
FUZZ_TOK_PKGS := libpcre2-8 libutf8proc json-c

$(BUILD)/fuzz/fuzz_tokenizer: $(FUZZ_TOK_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -Iinclude -Ilibtx $(FUZZ_FLAGS) \
		$(shell pkg-config --cflags $(FUZZ_TOK_PKGS)) -o $@ $(FUZZ_TOK_SRCS) \
		$(shell pkg-config --libs $(FUZZ_TOK_PKGS)) -lm -pthread

$(BUILD)/fuzz/fuzz_tokenizer_replay: $(FUZZ_TOK_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -DTX_FUZZ_STANDALONE -Iinclude -Ilibtx -g -O1 \
		-fsanitize=address,undefined -fno-sanitize-recover=all \
		$(shell pkg-config --cflags $(FUZZ_TOK_PKGS)) -o $@ $(FUZZ_TOK_SRCS) \
		$(shell pkg-config --libs $(FUZZ_TOK_PKGS)) -lm -pthread

fuzz-tokenizer: $(BUILD)/fuzz/fuzz_tokenizer

fuzz-tokenizer-run: $(BUILD)/fuzz/fuzz_tokenizer
	@mkdir -p $(BUILD)/fuzz/corpus-tokenizer
	$< -max_total_time=$(FUZZ_TIME) -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
		$(BUILD)/fuzz/corpus-tokenizer tests/fuzz/corpus/tokenizer

fuzz-tokenizer-replay: $(BUILD)/fuzz/fuzz_tokenizer_replay
	$< tests/fuzz/corpus/tokenizer/*

.PHONY: fuzz-tokenizer fuzz-tokenizer-run fuzz-tokenizer-replay
