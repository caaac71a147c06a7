# tx8.ko and the QEMU dev box (docs/devbox.md, docs/kernel.md).
#
#   make module       build kernel/tx8.ko into $(BUILD)/kmod/ against KDIR
#                     (W=1; add C=1 for sparse)
#   make checkpatch   run checkpatch.pl --no-tree on the driver and UAPI
#   make vm-image     the guest initramfs, $(BUILD)/vm/initramfs.cpio.gz
#   make vm           boot the dev box: a shell on the serial console
#   make vm-check     boot once, run the in-guest VM suite, exit with it
#   make dkms-install copy the sources to /usr/src/tx8-VERSION, dkms add
#   make vm-check-debug  the VM suite on the debug guest kernel (KASAN,
#                     lockdep; scripts/vm/build-debug-kernel first, about an
#                     hour; not part of make check; docs/kernel.md)
#
# KVER (the guest kernel, also the one built against) defaults to the
# newest 6.12+ kernel with headers in /lib/modules; KDIR to its build dir.

KVER ?= $(shell ls -d /lib/modules/*/build 2>/dev/null | \
	sed -e 's|/lib/modules/||' -e 's|/build||' | \
	grep -E '^(6\.(1[2-9]|[2-9][0-9])|[7-9]\.)' | sort -V | tail -n 1)
KDIR ?= /lib/modules/$(KVER)/build
KMOD_DIR := $(BUILD)/kmod
TX8_KO := $(KMOD_DIR)/kernel/tx8.ko
TX8_DKMS_VERSION := 1.0
CHECKPATCH ?= $(firstword $(wildcard /usr/local/share/tx8-checkpatch/checkpatch.pl \
	/usr/src/linux-headers-*/scripts/checkpatch.pl \
	/lib/modules/*/build/scripts/checkpatch.pl /usr/share/checkpatch/checkpatch.pl))

KMOD_SRCS := $(wildcard kernel/*.c kernel/*.h) kernel/Kbuild Kbuild \
	include/uapi/drm/tx8_accel.h include/tx8/tx8_hw.h

# The sources are linked into $(KMOD_DIR) so that Kbuild writes its
# objects there and not into kernel/.
module: $(TX8_KO)
$(TX8_KO): $(KMOD_SRCS)
	@test -f $(KDIR)/Makefile || { echo "module: no kernel build tree at KDIR=$(KDIR) (scripts/install-deps)"; exit 1; }
	@mkdir -p $(KMOD_DIR)/kernel
	@ln -sfn $(CURDIR)/Kbuild $(KMOD_DIR)/Kbuild
	@ln -sfn $(CURDIR)/include $(KMOD_DIR)/include
	@for f in kernel/*.c kernel/*.h kernel/Kbuild; do \
		ln -sfn $(CURDIR)/$$f $(KMOD_DIR)/$$f; done
	$(MAKE) -C $(KDIR) M=$(abspath $(KMOD_DIR)) W=1 $(if $(C),C=$(C)) modules

checkpatch:
	@test -n "$(CHECKPATCH)" || { echo "checkpatch: checkpatch.pl not found (set CHECKPATCH=)"; exit 1; }
	$(CHECKPATCH) --no-tree --strict --show-types --ignore SPDX_LICENSE_TAG \
		-f kernel/*.c kernel/*.h include/uapi/drm/tx8_accel.h
	@# The hardware header is shared with user space: BIT() and the kernel's
	@# types-only rules cannot apply there.
	$(CHECKPATCH) --no-tree --strict --show-types \
		--ignore SPDX_LICENSE_TAG,BIT_MACRO,NEW_TYPEDEFS,CAMELCASE -f include/tx8/tx8_hw.h

module-clean:
	rm -rf $(KMOD_DIR)

# --- the dev box -----------------------------------------------------------

VM_TEST_SRCS := $(sort $(wildcard tests/vm/*.c))
VM_TEST_BINS := $(patsubst tests/vm/%.c,$(BUILD)/vm/bin/%,$(VM_TEST_SRCS))
VM_INITRD    := $(BUILD)/vm/initramfs.cpio.gz
# Unit-test programs the guest runs on backend accel (tests/vm/run-suite).
VM_UNIT_NAMES := $(filter $(UNIT_TESTS),test_device test_runtime test_precision \
	test_runtime_telemetry test_txtop_live)
VM_UNIT_BINS  := $(addprefix $(BUILD)/tests/,$(VM_UNIT_NAMES))

# The GLM package of the in-guest inference tests: glm-synth's tiny GLM-5.1
# checkpoint exported with --quant int8 (the article's golden plan), made
# at image build time on the host.
VM_GLM_DIR := $(BUILD)/vm/glm
VM_GLM_SMD := $(VM_GLM_DIR)/glm5-tiny.smd
$(VM_GLM_SMD): $(BUILD)/bin/glm-synth $(BUILD)/bin/glm-export
	@mkdir -p $(VM_GLM_DIR)
	rm -rf $(VM_GLM_DIR)/ck $(VM_GLM_DIR)/tmp.smd
	$(BUILD)/bin/glm-synth --arch glm5 --preset tiny --seed 42 --quiet \
		--output $(VM_GLM_DIR)/ck
	$(BUILD)/bin/glm-export --input $(VM_GLM_DIR)/ck --output $(VM_GLM_DIR)/tmp.smd \
		--quant int8 --quiet
	rm -rf $(VM_GLM_DIR)/ck
	mv $(VM_GLM_DIR)/tmp.smd $@

# In-guest test programs: raw UAPI plus libdrm, no libtx.
$(BUILD)/vm/bin/%: tests/vm/%.c $(wildcard tests/vm/*.h) include/uapi/drm/tx8_accel.h \
		include/tx8/tx8_hw.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/vm $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(shell pkg-config --libs libdrm) $(LDLIBS)

vm-image: $(VM_INITRD)
$(VM_INITRD): $(TX8_KO) all $(VM_UNIT_BINS) $(VM_TEST_BINS) $(VM_GLM_SMD) \
		scripts/vm/mkinitramfs scripts/vm/init tests/vm/run-suite tests/vm/glm-server-recovery \
		$(wildcard tests/txtop/vm-check.sh)
	scripts/vm/mkinitramfs --build $(BUILD) --kver $(KVER) --module $(TX8_KO) \
		--tests "$(VM_UNIT_NAMES)" --glm $(VM_GLM_SMD) --out $@

vm: vm-image
	scripts/vm/run --build $(BUILD) --kver $(KVER) --mode shell

vm-check: vm-image
	scripts/vm/run --build $(BUILD) --kver $(KVER) --mode check

dkms-install:
	install -d $(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/kernel \
		$(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/include/uapi/drm \
		$(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/include/tx8
	install -m 644 Kbuild dkms.conf $(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/
	install -m 644 kernel/*.c kernel/*.h kernel/Kbuild \
		$(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/kernel/
	install -m 644 include/uapi/drm/tx8_accel.h \
		$(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/include/uapi/drm/
	install -m 644 include/tx8/tx8_hw.h \
		$(DESTDIR)/usr/src/tx8-$(TX8_DKMS_VERSION)/include/tx8/
	@if [ -z "$(DESTDIR)" ]; then dkms add tx8/$(TX8_DKMS_VERSION) && \
		echo "now: dkms install tx8/$(TX8_DKMS_VERSION)"; fi

# --- the debug guest kernel (scripts/vm/build-debug-kernel) -----------------
# tx8.ko built against it into $(BUILD)/kmod-debug, its own initramfs, and
# the suite booted on it. TX8_VM_APPEND=txvm_only=... narrows the suite.
DEBUG_KERNEL_DIR ?= build/debug-kernel
DEBUG_KDIR := $(DEBUG_KERNEL_DIR)/obj
DEBUG_KVER = $(shell cat $(DEBUG_KDIR)/include/config/kernel.release 2>/dev/null)
DEBUG_KMOD_DIR := $(BUILD)/kmod-debug
DEBUG_TX8_KO := $(DEBUG_KMOD_DIR)/kernel/tx8.ko
DEBUG_INITRD := $(BUILD)/vm-debug/initramfs.cpio.gz

$(DEBUG_TX8_KO): $(KMOD_SRCS)
	@test -f $(DEBUG_KDIR)/arch/x86/boot/bzImage || { echo "vm-check-debug: no debug kernel in $(DEBUG_KDIR) (run scripts/vm/build-debug-kernel)"; exit 1; }
	@mkdir -p $(DEBUG_KMOD_DIR)/kernel
	@ln -sfn $(CURDIR)/Kbuild $(DEBUG_KMOD_DIR)/Kbuild
	@ln -sfn $(CURDIR)/include $(DEBUG_KMOD_DIR)/include
	@for f in kernel/*.c kernel/*.h kernel/Kbuild; do \
		ln -sfn $(CURDIR)/$$f $(DEBUG_KMOD_DIR)/$$f; done
	$(MAKE) -C $(abspath $(DEBUG_KDIR)) M=$(abspath $(DEBUG_KMOD_DIR)) W=1 modules

$(DEBUG_INITRD): $(DEBUG_TX8_KO) $(VM_INITRD)
	scripts/vm/mkinitramfs --build $(BUILD) --kver $(DEBUG_KVER) --module $(DEBUG_TX8_KO) \
		--moddir $(DEBUG_KERNEL_DIR)/root/lib/modules/$(DEBUG_KVER) \
		--tests "$(VM_UNIT_NAMES)" --glm $(VM_GLM_SMD) --out $@

vm-check-debug: $(DEBUG_INITRD)
	scripts/vm/run --build $(BUILD) --kver $(DEBUG_KVER) --mode check \
		--kernel $(DEBUG_KDIR)/arch/x86/boot/bzImage --initrd $(DEBUG_INITRD) \
		--timeout $${TX8_VM_TIMEOUT:-3000} --boot-timeout $${TX8_VM_BOOT_TIMEOUT:-900}

.PHONY: module checkpatch module-clean vm-image vm vm-check dkms-install vm-check-debug
