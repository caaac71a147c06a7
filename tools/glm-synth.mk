# tools/glm-synth.mk: glm-synth finds the tokenizer data the project ships
# (data/, installed as $(PREFIX)/share/tx8/) without flags.
TX8_DATADIR := $(PREFIX)/share/tx8
$(BUILD)/obj/tools/glm-synth/glm-synth.o: CPPFLAGS += \
	-DTX8_DATADIR='"$(TX8_DATADIR)"' -DTX8_SRCDIR='"$(CURDIR)"'
