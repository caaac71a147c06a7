// SPDX-License-Identifier: MIT
/*
 * ptyrun: run a full-screen program on a pseudo-terminal of a given size and
 * print the screen it leaves (the guest has no tmux; tests/txtop/vm-check.sh
 * uses this to check tx-top's screen inside the dev box).
 *
 *   ptyrun [-s COLSxROWS] [-t SECONDS] [-k KEYS@SECONDS]... -- PROGRAM ARGS...
 *
 * The program runs in a new session with the pty as its controlling
 * terminal, TERM as inherited (use a vt100-class terminal: the screen model
 * below implements what ncurses emits for vt100, vt220, linux and xterm
 * without colour reproduction: cursor addressing and motion, erase in line
 * and display, scroll regions, index / reverse index, insert / delete
 * lines and characters, save / restore cursor; attributes, colours, charset
 * switches and modes are ignored). UTF-8 sequences occupy one cell.
 * -k writes KEYS to the terminal SECONDS after the start (repeatable).
 * When the program exits (or after -t SECONDS, default 60, when it is
 * stopped with SIGTERM, then SIGKILL) the screen is printed, one line per
 * row with trailing blanks removed. Exit status: the program's, 124 on
 * timeout, 125 for ptyrun's own errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAXC 400
#define MAXR 200
#define MAXKEYS 16

static char cell[MAXR][MAXC][5];
static int cols = 120, rows = 40, cx, cy, top, bot, sx, sy;

static void blank(int r, int c0, int c1)
{
    for (int c = c0; c < c1 && c < cols; c++)
        strcpy(cell[r][c], " ");
}

static void clamp(void)
{
    cx = cx < 0 ? 0 : cx >= cols ? cols - 1 : cx;
    cy = cy < 0 ? 0 : cy >= rows ? rows - 1 : cy;
}

/* Scroll rows [t, b] up (n > 0) or down (n < 0) by |n|. */
static void scroll(int t, int b, int n)
{
    for (; n > 0; n--) {
        memmove(cell[t], cell[t + 1], sizeof(cell[0]) * (size_t)(b - t));
        blank(b, 0, cols);
    }
    for (; n < 0; n++) {
        memmove(cell[t + 1], cell[t], sizeof(cell[0]) * (size_t)(b - t));
        blank(t, 0, cols);
    }
}

static void linefeed(void)
{
    if (cy == bot)
        scroll(top, bot, 1);
    else if (cy < rows - 1)
        cy++;
}

static void put(const char *ch, int len)
{
    if (cx >= cols) {
        cx = 0;
        linefeed();
    }
    memcpy(cell[cy][cx], ch, (size_t)len);
    cell[cy][cx][len] = 0;
    cx++;
}

static void csi(char fin, const int *p, int np, int priv)
{
    int a = np > 0 && p[0] > 0 ? p[0] : 1;

    if (priv)
        return; /* DEC private modes */
    switch (fin) {
    case 'H':
    case 'f':
        cy = (np > 0 && p[0] > 0 ? p[0] : 1) - 1;
        cx = (np > 1 && p[1] > 0 ? p[1] : 1) - 1;
        break;
    case 'A':
        cy -= a;
        break;
    case 'B':
        cy += a;
        break;
    case 'C':
        cx += a;
        break;
    case 'D':
        cx -= a;
        break;
    case 'G':
    case '`':
        cx = a - 1;
        break;
    case 'd':
        cy = a - 1;
        break;
    case 'K': {
        int m = np > 0 ? p[0] : 0;

        if (m == 0)
            blank(cy, cx, cols);
        else if (m == 1)
            blank(cy, 0, cx + 1);
        else
            blank(cy, 0, cols);
        break;
    }
    case 'J': {
        int m = np > 0 ? p[0] : 0;

        if (m == 0) {
            blank(cy, cx, cols);
            for (int r = cy + 1; r < rows; r++)
                blank(r, 0, cols);
        } else if (m == 1) {
            for (int r = 0; r < cy; r++)
                blank(r, 0, cols);
            blank(cy, 0, cx + 1);
        } else {
            for (int r = 0; r < rows; r++)
                blank(r, 0, cols);
        }
        break;
    }
    case 'r':
        top = (np > 0 && p[0] > 0 ? p[0] : 1) - 1;
        bot = (np > 1 && p[1] > 0 ? p[1] : rows) - 1;
        if (top < 0 || bot >= rows || top >= bot) {
            top = 0;
            bot = rows - 1;
        }
        cx = cy = 0;
        break;
    case 'L':
        if (cy >= top && cy <= bot)
            scroll(cy, bot, -(a > bot - cy + 1 ? bot - cy + 1 : a));
        break;
    case 'M':
        if (cy >= top && cy <= bot)
            scroll(cy, bot, a > bot - cy + 1 ? bot - cy + 1 : a);
        break;
    case 'S':
        scroll(top, bot, a);
        break;
    case 'T':
        scroll(top, bot, -a);
        break;
    case 'P': /* delete characters */
        for (int c = cx; c < cols; c++)
            strcpy(cell[cy][c], c + a < cols ? cell[cy][c + a] : " ");
        break;
    case '@': /* insert blanks */
        for (int c = cols - 1; c >= cx; c--)
            strcpy(cell[cy][c], c - a >= cx ? cell[cy][c - a] : " ");
        break;
    case 'X':
        blank(cy, cx, cx + a);
        break;
    default: /* m (attributes), h/l (modes), n, ... */
        break;
    }
    clamp();
}

/* The terminal's parser, fed byte by byte. */
static void feed(const unsigned char *b, size_t n)
{
    static int state; /* 0 text, 1 ESC, 2 CSI, 3 charset designation, 4 OSC */
    static int par[16], npar, priv;
    static char u8[5];
    static int u8len, u8need;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = b[i];

        switch (state) {
        case 1:
            state = 0;
            if (c == '[') {
                state = 2;
                npar = 0;
                priv = 0;
                memset(par, 0, sizeof(par));
            } else if (c == '(' || c == ')' || c == '*' || c == '+') {
                state = 3;
            } else if (c == ']') {
                state = 4;
            } else if (c == 'D') {
                linefeed();
            } else if (c == 'E') {
                cx = 0;
                linefeed();
            } else if (c == 'M') {
                if (cy == top)
                    scroll(top, bot, -1);
                else if (cy > 0)
                    cy--;
            } else if (c == '7') {
                sx = cx;
                sy = cy;
            } else if (c == '8') {
                cx = sx;
                cy = sy;
            } else if (c == 'c') {
                for (int r = 0; r < rows; r++)
                    blank(r, 0, cols);
                cx = cy = top = 0;
                bot = rows - 1;
            }
            continue;
        case 2:
            if (c >= '0' && c <= '9') {
                if (npar == 0)
                    npar = 1;
                par[npar - 1] = par[npar - 1] * 10 + (c - '0');
            } else if (c == ';') {
                if (npar == 0)
                    npar = 1;
                if (npar < 16)
                    npar++;
            } else if (c == '?' || c == '>' || c == '=') {
                priv = 1;
            } else if (c >= 0x40 && c <= 0x7e) {
                csi((char)c, par, npar, priv);
                state = 0;
            }
            continue;
        case 3:
            state = 0;
            continue;
        case 4: /* OSC: until BEL or ESC \ */
            if (c == 7)
                state = 0;
            else if (c == 0x1b)
                state = 1;
            continue;
        }
        if (u8need) {
            if ((c & 0xc0) == 0x80) {
                u8[u8len++] = (char)c;
                if (--u8need == 0)
                    put(u8, u8len);
                continue;
            }
            u8need = 0;
        }
        if (c == 0x1b) {
            state = 1;
        } else if (c == '\r') {
            cx = 0;
        } else if (c == '\n' || c == 0x0b || c == 0x0c) {
            linefeed();
        } else if (c == '\b') {
            if (cx > 0)
                cx--;
        } else if (c == '\t') {
            cx = (cx / 8 + 1) * 8;
            if (cx >= cols)
                cx = cols - 1;
        } else if (c >= 0xc0 && c < 0xf8) {
            u8[0] = (char)c;
            u8len = 1;
            u8need = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
        } else if (c >= 0x20 && c != 0x7f && c < 0x80) {
            char s[2] = {(char)c, 0};

            put(s, 1);
        }
    }
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: ptyrun [-s COLSxROWS] [-t SECONDS] [-k KEYS@SECONDS]... -- PROGRAM ARGS...\n");
    exit(125);
}

int main(int argc, char **argv)
{
    struct {
        char keys[64];
        double at;
        int sent;
    } keys[MAXKEYS];
    int nkeys = 0, opt, master, status = 0, timed_out = 0, exited = 0;
    double timeout = 60, t0;
    struct winsize ws;
    pid_t pid;

    while ((opt = getopt(argc, argv, "+s:t:k:")) != -1) {
        char *at, *end;

        switch (opt) {
        case 's':
            if (sscanf(optarg, "%dx%d", &cols, &rows) != 2 || cols < 10 || cols > MAXC ||
                rows < 2 || rows > MAXR)
                usage();
            break;
        case 't':
            timeout = strtod(optarg, &end);
            if (*end || !(timeout > 0))
                usage();
            break;
        case 'k':
            at = strrchr(optarg, '@');
            if (!at || nkeys == MAXKEYS || (size_t)(at - optarg) >= sizeof(keys[0].keys))
                usage();
            memcpy(keys[nkeys].keys, optarg, (size_t)(at - optarg));
            keys[nkeys].keys[at - optarg] = 0;
            keys[nkeys].at = strtod(at + 1, &end);
            keys[nkeys].sent = 0;
            if (*end || keys[nkeys].at < 0)
                usage();
            nkeys++;
            break;
        default:
            usage();
        }
    }
    if (optind >= argc)
        usage();
    top = 0;
    bot = rows - 1;
    for (int r = 0; r < rows; r++)
        blank(r, 0, cols);

    master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) || unlockpt(master) || !ptsname(master)) {
        perror("ptyrun: pty");
        return 125;
    }
    memset(&ws, 0, sizeof(ws));
    ws.ws_col = (unsigned short)cols;
    ws.ws_row = (unsigned short)rows;
    if (ioctl(master, TIOCSWINSZ, &ws) < 0) {
        perror("ptyrun: TIOCSWINSZ");
        return 125;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        perror("ptyrun: fork");
        return 125;
    }
    if (pid == 0) {
        int slave;

        setsid();
        slave = open(ptsname(master), O_RDWR);
        if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
            _exit(125);
        dup2(slave, 0);
        dup2(slave, 1);
        dup2(slave, 2);
        if (slave > 2)
            close(slave);
        execvp(argv[optind], argv + optind);
        _exit(127);
    }

    t0 = now_s();
    for (;;) {
        struct pollfd p = {master, POLLIN, 0};
        unsigned char buf[4096];
        double el = now_s() - t0;
        ssize_t n;

        for (int k = 0; k < nkeys; k++)
            if (!keys[k].sent && el >= keys[k].at) {
                if (write(master, keys[k].keys, strlen(keys[k].keys)) < 0)
                    perror("ptyrun: keys");
                keys[k].sent = 1;
            }
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = 1;
        if (!exited && el > timeout && !timed_out) {
            timed_out = 1;
            kill(pid, SIGTERM);
        }
        if (!exited && el > timeout + 3)
            kill(pid, SIGKILL);
        if (poll(&p, 1, 50) > 0) {
            n = read(master, buf, sizeof(buf));
            if (n > 0) {
                feed(buf, (size_t)n);
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            break; /* EIO: every slave end is closed */
        }
        if (exited)
            break; /* exited and nothing more to read */
    }
    if (!exited)
        waitpid(pid, &status, 0);
    close(master);

    for (int r = 0; r < rows; r++) {
        int last = -1;

        for (int c = 0; c < cols; c++)
            if (strcmp(cell[r][c], " "))
                last = c;
        for (int c = 0; c <= last; c++)
            fputs(cell[r][c], stdout);
        putchar('\n');
    }
    if (timed_out)
        return 124;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
