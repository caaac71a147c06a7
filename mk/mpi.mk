# mk/mpi.mk: Open MPI for glm-inference's multi-host expert parallelism
# (tools/glm-inference/mpi.c, docs/multi-device.md "Several hosts").
#
# The MPI glue is built only when mpicc exists (Debian: openmpi-bin,
# libopenmpi-dev; scripts/install-deps installs them). Without it
# glm-inference builds as before and refuses to run under mpirun with a
# message; `make TX8_NO_MPI=1` builds without MPI even when it is there.
#
#   make mpi-check    the MPI suite (tests/mpi/run): the transport self-test
#                     and glm-inference under mpirun -np 2 vs one process
#   make mpi-bench    the loopback alltoallv timings of docs/multi-device.md

MPICC ?= $(if $(TX8_NO_MPI),,$(shell command -v mpicc 2>/dev/null))
MPI_CFLAGS := $(if $(MPICC),$(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS   := $(if $(MPICC),$(shell $(MPICC) --showme:link 2>/dev/null))
HAVE_MPI   := $(if $(strip $(MPI_LIBS)),1,)

# Open MPI's headers are system headers (-isystem): our warnings, not theirs.
MPI_CPPFLAGS := $(if $(HAVE_MPI),-DGLM_HAVE_MPI $(patsubst -I%,-isystem %,$(MPI_CFLAGS)))

# mpi.o is rebuilt when MPI appears or goes (the flags are in a stamp file
# that changes only when they do).
MPI_STAMP := $(BUILD)/gen/mpi-flags
$(MPI_STAMP): tx8-mpi-force
	@mkdir -p $(dir $@)
	@echo '$(MPI_CPPFLAGS) $(MPI_LIBS)' | cmp -s - $@ 2>/dev/null || \
		echo '$(MPI_CPPFLAGS) $(MPI_LIBS)' > $@

$(BUILD)/obj/tools/glm-inference/mpi.o: CPPFLAGS += $(MPI_CPPFLAGS)
$(BUILD)/obj/tools/glm-inference/mpi.o: $(MPI_STAMP)
glm-inference_LIBS += $(if $(HAVE_MPI),$(MPI_LIBS))

# The transport self-test: the real transport (mpi.c) between the ranks of
# an mpirun job, no device (tests/mpi/transport_test.c).
MPI_TEST_BIN := $(BUILD)/tests/mpi/transport-test
$(MPI_TEST_BIN): tests/mpi/transport_test.c tools/glm-inference/mpi.c \
		tools/glm-inference/mpi_transport.h include/tx/glm.h $(MPI_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(MPI_CPPFLAGS) -Itools/glm-inference $(CFLAGS) $(LDFLAGS) -o $@ \
		tests/mpi/transport_test.c tools/glm-inference/mpi.c $(MPI_LIBS) $(LDLIBS)

mpi-check: all $(if $(HAVE_MPI),$(MPI_TEST_BIN))
	@BUILD=$(BUILD) HAVE_MPI=$(HAVE_MPI) tests/mpi/run

mpi-bench: all $(if $(HAVE_MPI),$(MPI_TEST_BIN))
	@BUILD=$(BUILD) HAVE_MPI=$(HAVE_MPI) tests/mpi/bench

tx8-mpi-force:

.PHONY: mpi-check mpi-bench tx8-mpi-force
