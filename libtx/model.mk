# libtx/model.mk: model formats (safetensors, ONNX, .smd): generated
# protobuf-c code for the ONNX subset, and the fuzz targets of the parsers.

# ONNX: libtx/model/onnx/onnx.proto -> $(BUILD)/gen/onnx.pb-c.{c,h}
ONNX_PROTO := libtx/model/onnx/onnx.proto
ONNX_GEN_C := $(BUILD)/gen/onnx.pb-c.c
ONNX_GEN_H := $(BUILD)/gen/onnx.pb-c.h
LIBTX_GEN_SRCS += $(ONNX_GEN_C)

$(ONNX_GEN_H): $(ONNX_GEN_C)
$(ONNX_GEN_C): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=libtx/model/onnx --c_out=$(BUILD)/gen $(ONNX_PROTO)

# Everything in libtx/model/ and the tests may include the generated header.
$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard libtx/model/*.c)): $(ONNX_GEN_H)

# Fuzz targets of the model parsers: tests/fuzz/fuzz_{safetensors,smd,onnx}.c,
# fuzz_config.c (config.json, glm_config_from_json) and fuzz_moe_yaml.c
# (config/expert_parallel.yaml, glm_moe_config_load in libtx/runtime/moe.c)
#
#   make BUILD=... tests               also builds the replay drivers
#                                      $(BUILD)/fuzz/fuzz_NAME_replay FILE|DIR...
#                                      (-DTX_FUZZ_STANDALONE, linked with libtx.a)
#   make BUILD=... fuzz-model          libFuzzer binaries $(BUILD)/fuzz/fuzz_NAME
#                                      (clang; the parsers are compiled in with
#                                      coverage)
#   make BUILD=... fuzz-model-run [FUZZ_TIME=60]
#                                      fuzz each for FUZZ_TIME seconds; new
#                                      inputs go to $(BUILD)/fuzz/corpus-NAME
#
# The committed seed corpora are tests/fuzz/corpus/NAME/; the unit test
# test_model_fuzz replays them on every run.
MODEL_FUZZ        := fuzz_safetensors fuzz_smd fuzz_onnx fuzz_config
MODEL_FUZZ_ALL    := $(MODEL_FUZZ) fuzz_moe_yaml
MODEL_FUZZ_REPLAY := $(addprefix $(BUILD)/fuzz/,$(addsuffix _replay,$(MODEL_FUZZ_ALL)))
MODEL_FUZZ_LF     := $(addprefix $(BUILD)/fuzz/,$(MODEL_FUZZ))
MODEL_FUZZ_LF_ALL := $(MODEL_FUZZ_LF) $(BUILD)/fuzz/fuzz_moe_yaml
MODEL_FUZZ_CC     ?= clang
MODEL_FUZZ_TIME   ?= $(if $(FUZZ_TIME),$(FUZZ_TIME),60)

tests: $(MODEL_FUZZ_REPLAY)

# (LIBTX_A is defined after the sub-makefiles are read: name the file here)
$(MODEL_FUZZ_REPLAY): $(BUILD)/fuzz/%_replay: tests/fuzz/%.c tests/fuzz/fuzz_model_replay.h \
		$(BUILD)/lib/libtx.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DTX_FUZZ_STANDALONE $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBTX_A) \
		$(LIBTX_LIBS) $(LDLIBS)

MODEL_FUZZ_SRCS = $(sort $(wildcard libtx/model/*.c)) $(ONNX_GEN_C)
$(MODEL_FUZZ_LF): $(BUILD)/fuzz/%: tests/fuzz/%.c $(ONNX_GEN_C) $(wildcard libtx/model/*.[ch]) \
		$(wildcard include/tx/*.h)
	@mkdir -p $(dir $@)
	$(MODEL_FUZZ_CC) $(CPPFLAGS) -std=c11 -g -O1 -pthread \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ $< $(MODEL_FUZZ_SRCS) $(LIBTX_LIBS) -lm

# The YAML parser lives in the runtime: its file is compiled in with
# coverage, the rest of libtx comes from libtx.a (of a build without SAN=1:
# gcc's sanitizer runtime does not mix with clang's).
$(BUILD)/fuzz/fuzz_moe_yaml: tests/fuzz/fuzz_moe_yaml.c libtx/runtime/moe.c \
		$(wildcard libtx/runtime/*.h) $(wildcard include/tx/*.h) $(BUILD)/lib/libtx.a
	@mkdir -p $(dir $@)
	$(MODEL_FUZZ_CC) $(CPPFLAGS) -std=c11 -g -O1 -pthread \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ $< libtx/runtime/moe.c $(LIBTX_A) $(LIBTX_LIBS) -lm

fuzz-model:
	@if command -v $(MODEL_FUZZ_CC) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(MODEL_FUZZ_LF_ALL); \
	else echo "fuzz-model: $(MODEL_FUZZ_CC) not found; use the replay drivers" \
		"(make tests: $(BUILD)/fuzz/fuzz_*_replay)"; fi

fuzz-model-run: fuzz-model
	@for n in $(patsubst fuzz_%,%,$(MODEL_FUZZ_ALL)); do \
		mkdir -p $(BUILD)/fuzz/corpus-$$n; \
		$(BUILD)/fuzz/fuzz_$$n -max_total_time=$(MODEL_FUZZ_TIME) -max_len=65536 \
			-timeout=10 -rss_limit_mb=2048 $(BUILD)/fuzz/corpus-$$n \
			tests/fuzz/corpus/$$n || exit 1; \
	done

.PHONY: fuzz-model fuzz-model-run
