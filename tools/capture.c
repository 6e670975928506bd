/*
 * capture.c - libsalus's own messages while salus-top's live view is up.
 * The table code the tools link (ipc, sched, memory, util) says what went
 * wrong on stderr, "salus[<pid>]: <level>: ..." in one write(2); under
 * curses such a line would be drawn over the screen, at the cursor, and
 * stay there through refreshes (curses does not know it is there).  So
 * while the live view runs, file descriptor 2 is the write end of a pipe:
 * the view reads whole lines from it into its message line, and when the
 * view ends the real stderr comes back and every line captured is written
 * on it, in order, so that nothing said is lost once the screen is gone.
 *
 * Divided into: starting (the pipe in place of fd 2); reading lines;
 * stopping (stderr back, the lines written out).
 *
 * Both ends are non-blocking: a writer whose line does not fit in the
 * pipe loses it (util's log drops what it cannot write) rather than
 * blocking the monitor on itself.  The tool is single-threaded: no lock.
 */
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define KEEP_LINES  32               /* written out at the end; more are counted */
#define LINE_BYTES  512

static int saved_fd = -1;            /* the real stderr, while captured */
static int read_fd = -1;
static char pending[2 * LINE_BYTES];
static size_t npending;
static char kept[KEEP_LINES][LINE_BYTES];
static int nkept, dropped;

/* ---- starting ------------------------------------------------------------------ */

int top_capture_start(void)
{
    int fds[2];
    if (saved_fd >= 0)
        return 0;
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -errno;
    int saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved < 0 || dup2(fds[1], STDERR_FILENO) < 0) {
        int err = errno;
        if (saved >= 0)
            close(saved);
        close(fds[0]);
        close(fds[1]);
        return -err;
    }
    close(fds[1]);
    saved_fd = saved;
    read_fd = fds[0];
    npending = 0;
    nkept = dropped = 0;
    return 0;
}

/* ---- reading lines --------------------------------------------------------------- */

static void keep(const char *line)
{
    if (nkept < KEEP_LINES)
        snprintf(kept[nkept++], LINE_BYTES, "%.*s", LINE_BYTES - 1, line);
    else
        dropped++;
}

/* Move the first whole line of `pending` (or all of it when it is full
 * without one: a line too long is cut) into buf: 1, or 0 when none. */
static int take_line(char *buf, size_t len)
{
    char *nl = memchr(pending, '\n', npending);
    size_t n = nl ? (size_t)(nl - pending) : npending;
    if (!nl && npending < sizeof pending)
        return 0;
    char line[LINE_BYTES];
    snprintf(line, sizeof line, "%.*s", (int)n, pending);
    size_t used = nl ? n + 1 : n;
    memmove(pending, pending + used, npending - used);
    npending -= used;
    keep(line);
    top_sanitize(line);
    snprintf(buf, len, "%s", line);
    return 1;
}

int top_capture_line(char *buf, size_t len)
{
    if (read_fd < 0)
        return 0;
    while (npending < sizeof pending) {
        ssize_t r = read(read_fd, pending + npending, sizeof pending - npending);
        if (r <= 0)
            break;                   /* EAGAIN: nothing more now */
        npending += (size_t)r;
    }
    return take_line(buf, len);
}

/* ---- stopping ---------------------------------------------------------------------- */

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0 && errno != EINTR)
            return;
        if (w > 0) {
            s += w;
            n -= (size_t)w;
        }
    }
}

void top_capture_stop(void)
{
    if (saved_fd < 0)
        return;
    char line[LINE_BYTES];
    while (top_capture_line(line, sizeof line))
        ;                            /* into kept[] */
    if (npending > 0 && npending < sizeof pending) {
        pending[npending] = '\0';    /* a last line without its newline */
        keep(pending);
    }
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    close(read_fd);
    saved_fd = read_fd = -1;
    for (int i = 0; i < nkept; i++) {
        write_all(STDERR_FILENO, kept[i], strlen(kept[i]));
        write_all(STDERR_FILENO, "\n", 1);
    }
    if (dropped > 0) {
        snprintf(line, sizeof line, "salus-top: %d more lines of libsalus were shown and "
                 "not kept\n", dropped);
        write_all(STDERR_FILENO, line, strlen(line));
    }
    nkept = dropped = 0;
    npending = 0;
}
