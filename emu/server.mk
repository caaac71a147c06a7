# tx8-emu (emu/server/) and the libtx device layer (libtx/device/).
#
# libtx/device/registry.c compiles the accel backend in when
# libtx/device/backend_accel.c exists (__has_include): rebuild it when that
# file appears or changes.
$(BUILD)/obj/libtx/device/registry.o: $(wildcard libtx/device/backend_accel.c)

# The device model uses libnuma directly (memory placement).
ENGINE_LIBS += $(if $(filter -lnuma,$(ENGINE_LIBS)),,-lnuma)
