# tests/tokenizer.mk: tok-load-bench, the load time of a tokenizer.json
# through the loader's two paths (tests/tokenizer/tok_load_bench.c; the
# figures are in docs/tokenizer.md, "Loading"). Not part of `all`.
#
#   make BUILD=build tok-load-bench && build/bench/tok-load-bench [FILE [RUNS]]
TOK_LOAD_BENCH := $(BUILD)/bench/tok-load-bench

tok-load-bench: $(TOK_LOAD_BENCH)

$(TOK_LOAD_BENCH): tests/tokenizer/tok_load_bench.c $(BUILD)/lib/libtx.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBTX_A) \
		$(LIBTX_LIBS) $(LDLIBS)

.PHONY: tok-load-bench
