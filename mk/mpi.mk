# mk/mpi.mk: Open MPI for the multi-host expert parallelism of glm-inference
# and glm-server (tools/lib/mpi_transport.c, docs/multi-device.md and
# docs/glm-server.md, "Several hosts").
#
# The MPI glue is built only when mpicc exists (Debian: openmpi-bin,
# libopenmpi-dev; scripts/install-deps installs them). Without it
# the tools build as before and refuse to run under mpirun with a message;
# `make TX8_NO_MPI=1` builds without MPI even when it is there.
#
#   make mpi-check    the MPI suite (tests/mpi/run): the transport self-test
#                     and glm-inference under mpirun -np 2 vs one process;
#                     then glm-server under mpirun -np 4, on loopback and
#                     with each rank in a network namespace of its own
#                     (tests/mpi/server; alone: make mpi-server-check)
#   make mpi-bench    the loopback alltoallv timings of docs/multi-device.md

MPICC ?= $(if $(TX8_NO_MPI),,$(shell command -v mpicc 2>/dev/null))
MPI_CFLAGS := $(if $(MPICC),$(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS   := $(if $(MPICC),$(shell $(MPICC) --showme:link 2>/dev/null))
HAVE_MPI   := $(if $(strip $(MPI_LIBS)),1,)

# Open MPI's headers are system headers (-isystem): our warnings, not theirs.
MPI_CPPFLAGS := $(if $(HAVE_MPI),-DGLM_HAVE_MPI $(patsubst -I%,-isystem %,$(MPI_CFLAGS)))

# mpi_transport.o (libtx-tools.a) is rebuilt when MPI appears or goes (the
# flags are in a stamp file that changes only when they do); the tools
# that use it link Open MPI.
MPI_STAMP := $(BUILD)/gen/mpi-flags
$(MPI_STAMP): tx8-mpi-force
	@mkdir -p $(dir $@)
	@echo '$(MPI_CPPFLAGS) $(MPI_LIBS)' | cmp -s - $@ 2>/dev/null || \
		echo '$(MPI_CPPFLAGS) $(MPI_LIBS)' > $@

$(BUILD)/obj/tools/lib/mpi_transport.o: CPPFLAGS += $(MPI_CPPFLAGS)
$(BUILD)/obj/tools/lib/mpi_transport.o: $(MPI_STAMP)
glm-inference_LIBS += $(if $(HAVE_MPI),$(MPI_LIBS))
# (glm-server's are set in tools/glm-server.mk, included after this file)

# The transport self-test: the real transport (mpi_transport.c) between the
# ranks of an mpirun job, no device (tests/mpi/transport_test.c).
MPI_TEST_BIN := $(BUILD)/tests/mpi/transport-test
$(MPI_TEST_BIN): tests/mpi/transport_test.c tools/lib/mpi_transport.c \
		tools/include/common/mpi_transport.h include/tx/glm.h $(MPI_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(MPI_CPPFLAGS) -Itools/include $(CFLAGS) $(LDFLAGS) -o $@ \
		tests/mpi/transport_test.c tools/lib/mpi_transport.c $(MPI_LIBS) $(LDLIBS)

mpi-check: all $(if $(HAVE_MPI),$(MPI_TEST_BIN))
	@BUILD=$(BUILD) HAVE_MPI=$(HAVE_MPI) tests/mpi/run

# glm-server's part alone (tests/mpi/server)
mpi-server-check: all
	@BUILD=$(BUILD) HAVE_MPI=$(HAVE_MPI) tests/mpi/server

mpi-bench: all $(if $(HAVE_MPI),$(MPI_TEST_BIN))
	@BUILD=$(BUILD) HAVE_MPI=$(HAVE_MPI) tests/mpi/bench

tx8-mpi-force:

.PHONY: mpi-check mpi-server-check mpi-bench tx8-mpi-force
