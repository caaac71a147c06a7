/* SPDX-License-Identifier: MIT */
/* conn.c's libmicrohttpd callbacks (http.c passes them to MHD_start_daemon). */
#ifndef GLM_SERVER_CONN_H
#define GLM_SERVER_CONN_H

#include <sys/socket.h>

#include <microhttpd.h>

/* MHD_AcceptPolicyCallback: admit, evict the longest-waiting idle
 * connection, or refuse. */
enum MHD_Result conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* MHD_OPTION_NOTIFY_CONNECTION: track a connection from open to close. */
void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode code);

#endif
