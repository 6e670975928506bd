/*
 * http.c - salus-top --listen: /metrics over HTTP for a Prometheus scrape,
 * the same text as --prometheus, from a snapshot taken for the request.
 *
 * Divided into: the address to listen on; one request; the loop.
 *
 * Made to be left running: one connection at a time, in this one thread (no
 * lock); a request is read with a 2 s deadline and at most 8 KiB, and
 * answered with a 5 s deadline for the write; anything but GET or HEAD of
 * / or /metrics is refused with its status; a client that goes away costs
 * nothing (SIGPIPE is ignored).  The tables are read at most once per
 * MIN_SCRAPE_NS, whatever the rate of requests: a faster one gets the last
 * answer again.  It listens where it is told: ":PORT" is 127.0.0.1 only.
 */
#include "top.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

#define REQUEST_MAX     8192
#define READ_TIMEOUT_MS 2000
#define WRITE_TIMEOUT_S 5
#define MIN_SCRAPE_NS   (250ull * 1000 * 1000)

/* ---- the address to listen on ------------------------------------------------ */

int top_listen_parse(const char *text, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon[1] == '\0' || strlen(colon + 1) >= plen)
        return -1;
    long p;
    if (top_parse_long(colon + 1, 1, 65535, &p) != 0)
        return -1;
    size_t n = (size_t)(colon - text);
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']') {       /* [::1]:9400 */
        text++;
        n -= 2;
    }
    if (n >= hlen)
        return -1;
    if (n == 0)
        snprintf(host, hlen, "127.0.0.1");                     /* loopback unless told */
    else
        snprintf(host, hlen, "%.*s", (int)n, text);
    snprintf(port, plen, "%ld", p);
    return 0;
}

static int open_listener(const char *host, const char *port, char *err, size_t elen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, elen, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
            snprintf(err, elen, "%s:%s: %s", host, port, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* ---- one request ------------------------------------------------------------- */

static void send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;                      /* the client went away, or is too slow */
        buf += n;
        len -= (size_t)n;
    }
}

static void respond(int fd, int status, const char *reason, const char *type,
                    const char *body, size_t blen, int head)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", status, reason,
                     type, blen, status == 405 ? "Allow: GET, HEAD\r\n" : "");
    send_all(fd, hdr, (size_t)n);
    if (!head)
        send_all(fd, body, blen);
}

/* Read the request head, at most REQUEST_MAX bytes, by the deadline.
 * Its length, or -1. */
static int read_head(int fd, char *buf, size_t cap)
{
    size_t at = 0;
    uint64_t deadline = util_now_ns() + READ_TIMEOUT_MS * 1000000ull;
    while (at < cap - 1) {
        uint64_t now = util_now_ns();
        if (now >= deadline)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, (int)((deadline - now) / 1000000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t n = recv(fd, buf + at, cap - 1 - at, 0);
        if (n <= 0)
            return -1;
        at += (size_t)n;
        buf[at] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (int)at;
    }
    return -1;                           /* too long: not a scrape */
}

typedef struct server {
    top_collector_t *c;
    top_snap_t snap;
    char *body;                          /* the last answer */
    size_t blen;
    uint64_t body_ns;
} server_t;

static int metrics(server_t *sv)
{
    uint64_t now = util_now_ns();
    if (sv->body && now - sv->body_ns < MIN_SCRAPE_NS)
        return 0;
    int up = top_collect(sv->c, &sv->snap) == 0;
    if (!up)
        top_snap_free(&sv->snap);        /* salus_up 0 and nothing else */
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f)
        return -1;
    top_print_prometheus(f, &sv->snap, up);
    if (fclose(f) != 0) {
        free(body);
        return -1;
    }
    free(sv->body);
    sv->body = body;
    sv->blen = blen;
    sv->body_ns = now;
    return 0;
}

static void serve_one(server_t *sv, int fd)
{
    static const char index_page[] = "Salus exporter: see /metrics\n";
    char req[REQUEST_MAX], method[16], path[256];
    struct timeval wt = { .tv_sec = WRITE_TIMEOUT_S };
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
    if (read_head(fd, req, sizeof req) < 0 ||
        sscanf(req, "%15s %255s", method, path) != 2) {
        static const char msg[] = "bad request\n";
        respond(fd, 400, "Bad Request", "text/plain", msg, sizeof msg - 1, 0);
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    path[strcspn(path, "?")] = '\0';
    if (!head && strcmp(method, "GET") != 0) {
        static const char msg[] = "only GET and HEAD\n";
        respond(fd, 405, "Method Not Allowed", "text/plain", msg, sizeof msg - 1, 0);
    } else if (strcmp(path, "/metrics") == 0) {
        if (metrics(sv) != 0) {
            static const char msg[] = "out of memory\n";
            respond(fd, 500, "Internal Server Error", "text/plain", msg, sizeof msg - 1, head);
            return;
        }
        respond(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", sv->body,
                sv->blen, head);
    } else if (strcmp(path, "/") == 0) {
        respond(fd, 200, "OK", "text/plain", index_page, sizeof index_page - 1, head);
    } else {
        static const char msg[] = "not found: try /metrics\n";
        respond(fd, 404, "Not Found", "text/plain", msg, sizeof msg - 1, head);
    }
}

/* ---- the loop ----------------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int top_serve(top_collector_t *c, const char *listen_at)
{
    char host[256], port[16], err[512];
    if (top_listen_parse(listen_at, host, sizeof host, port, sizeof port) != 0) {
        fprintf(stderr, "salus-top: --listen \"%s\" is not accepted: it takes [ADDRESS]:PORT, "
                "e.g. :9400 (127.0.0.1), 0.0.0.0:9400, [::1]:9400\n", listen_at);
        return TOP_EXIT_USAGE;
    }
    int lfd = open_listener(host, port, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, "salus-top: cannot listen on %s\n", err);
        return TOP_EXIT_FAIL;
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "salus-top: serving http://%s%s%s:%s/metrics\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
    server_t sv = { .c = c };
    top_snap_init(&sv.snap);
    while (!stop) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        if (poll(&p, 1, 500) <= 0)
            continue;                    /* a signal, or time to look at stop */
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;                    /* the client left, or out of descriptors */
        serve_one(&sv, fd);
        close(fd);
    }
    close(lfd);
    free(sv.body);
    top_snap_free(&sv.snap);
    return TOP_EXIT_OK;
}
