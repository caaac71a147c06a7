# tools/txtop.mk: tx-top (tools/tx-top/) uses ncursesw.
TXTOP_CURSES_CFLAGS := $(shell pkg-config --cflags ncursesw 2>/dev/null)
tx-top_LIBS := $(shell pkg-config --libs ncursesw 2>/dev/null || echo -lncursesw -ltinfo)
$(BUILD)/obj/tools/tx-top/%.o: CPPFLAGS += $(TXTOP_CURSES_CFLAGS)

# The tx-top screen test: tx-top under tmux against a tx8-emu with a
# workload (the workload is tests/unit/test_txtop_live --workload).
txtop-screen-check: all tests
	@BUILD=$(BUILD) tests/txtop/screen-test.sh

.PHONY: txtop-screen-check
