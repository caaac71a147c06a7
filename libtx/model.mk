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
# fuzz_fp8.c (the FP8 checkpoint loader: quantization_config, scale binding),
# fuzz_config.c (config.json, glm_config_from_json) and fuzz_moe_yaml.c
# (config/expert_parallel.yaml, glm_moe_config_load in libtx/runtime/moe.c)
#
#   make BUILD=... tests               also builds the replay drivers
#                                      $(BUILD)/fuzz/fuzz_NAME_replay FILE|DIR...
#                                      (-DTX_FUZZ_STANDALONE, linked with libtx.a)
#   make BUILD=... fuzz                the libFuzzer binaries: tests/fuzz.mk
#
# The committed seed corpora are tests/fuzz/corpus/NAME/; the unit test
# test_model_fuzz replays them on every run.
MODEL_FUZZ        := fuzz_safetensors fuzz_smd fuzz_onnx fuzz_config fuzz_fp8
MODEL_FUZZ_ALL    := $(MODEL_FUZZ) fuzz_moe_yaml
MODEL_FUZZ_REPLAY := $(addprefix $(BUILD)/fuzz/,$(addsuffix _replay,$(MODEL_FUZZ_ALL)))

tests: $(MODEL_FUZZ_REPLAY)

# (LIBTX_A is defined after the sub-makefiles are read: name the file here)
$(MODEL_FUZZ_REPLAY): $(BUILD)/fuzz/%_replay: tests/fuzz/%.c tests/fuzz/fuzz_model_replay.h \
		$(BUILD)/lib/libtx.a $(BUILD)/lib/libtx-tools.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) -DTX_FUZZ_STANDALONE $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(TXTOOLS_A) $(LIBTX_A) \
		$(LIBTX_LIBS) $(LDLIBS)

