# tools/glm-server.mk: glm-server (tools/glm-server/) serves HTTP with
# libmicrohttpd (Debian: libmicrohttpd-dev, scripts/install-deps); under
# mpirun it uses the tools' MPI transport (mk/mpi.mk: Open MPI when found).
GLM_SERVER_HTTPD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
glm-server_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd) \
	$(if $(HAVE_MPI),$(MPI_LIBS))
$(BUILD)/obj/tools/glm-server/%.o: CPPFLAGS += $(GLM_SERVER_HTTPD_CFLAGS)

# The glm-server suite (tests/server/run-tests): curl and a Python client
# against a server on a tx8-emu; prints "server: N passed, N failed".
server-check: all
	@BUILD=$(BUILD) tests/server/run-tests

# The load benchmark (not a test): concurrency 1, 4, 8, 16, 32, a fixed
# number of requests each (tests/server/bench.py, docs/glm-server.md).
bench-server: all
	@BUILD=$(BUILD) tests/server/bench-server

.PHONY: server-check bench-server
