# tools/glm-server.mk: glm-server (tools/glm-server/) serves HTTP with
# libmicrohttpd (Debian: libmicrohttpd-dev, scripts/install-deps).
GLM_SERVER_HTTPD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
glm-server_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
$(BUILD)/obj/tools/glm-server/%.o: CPPFLAGS += $(GLM_SERVER_HTTPD_CFLAGS)
