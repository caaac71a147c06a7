/* SPDX-License-Identifier: MIT */
/*
 * vm_http: one HTTP/1.0 request to 127.0.0.1 for the VM suite's glm-server
 * check (tests/vm/glm-server-recovery); the guest's busybox wget crashes
 * (static glibc) and its nc does not wait for a reply.
 *
 *   vm_http PORT METHOD PATH [BODY]
 *
 * Prints the reply (status line, headers, body) on stdout. Exit 0 for a
 * 200, 1 for another status, 2 when there was no reply (30 s limit).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: vm_http PORT METHOD PATH [BODY]\n");
        return 2;
    }
    const char *body = argc > 4 ? argv[4] : NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 30};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
        connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        perror("vm_http: connect");
        return 2;
    }
    char head[512];
    int n = body ? snprintf(head, sizeof(head),
                            "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n\r\n",
                            argv[2], argv[3], strlen(body))
                 : snprintf(head, sizeof(head), "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
                            argv[2], argv[3]);
    if (n <= 0 || (size_t)n >= sizeof(head) || write(fd, head, (size_t)n) != n ||
        (body && write(fd, body, strlen(body)) != (ssize_t)strlen(body))) {
        perror("vm_http: send");
        return 2;
    }
    char buf[4096], first[64] = "";
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof(buf))) > 0) {
        if (got < sizeof(first) - 1) {
            size_t k = (size_t)r < sizeof(first) - 1 - got ? (size_t)r : sizeof(first) - 1 - got;
            memcpy(first + got, buf, k);
        }
        got += (size_t)r;
        fwrite(buf, 1, (size_t)r, stdout);
    }
    close(fd);
    if (!got)
        return 2;
    return !strncmp(first, "HTTP/1.1 200 ", 13) || !strncmp(first, "HTTP/1.0 200 ", 13) ? 0 : 1;
}
