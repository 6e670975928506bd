/*
 * http.c - salus-top --listen: /metrics over HTTP for a Prometheus scrape,
 * the same text as --prometheus, from a snapshot taken for the request.
 *
 * Divided into: the address to listen on; the answers; connections; the loop.
 *
 * Made to be left running beside clients that misbehave: one thread polls
 * the listener and up to MAX_CONNS connections at once (no lock), each with
 * its own deadlines: a request is read within 2 s and 8 KiB, an answer
 * written within 5 s, and a connection past its deadline is closed without
 * delaying anyone else.  At the cap, the connection that has waited longest
 * without sending a whole request makes room for the new one (an idle or
 * dribbling client cannot shut scrapes out).  Anything but GET or HEAD of /
 * or /metrics is refused with its status; a client that goes away costs
 * nothing (SIGPIPE is ignored, sockets do not block).  The tables are read
 * at most once per MIN_SCRAPE_NS, whatever the rate of requests: a faster
 * one is answered from the last snapshot.  Each client is answered with
 * what it may read itself (access.c).  It listens where it is told: ":PORT"
 * is 127.0.0.1 only.
 */
#include "top.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

#define REQUEST_MAX      8192
#define READ_TIMEOUT_NS  (2000ull * 1000000)
#define WRITE_TIMEOUT_NS (5000ull * 1000000)
#define MIN_SCRAPE_NS    (250ull * 1000 * 1000)
#define MAX_CONNS        64

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
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            snprintf(err, elen, "%s:%s: %s", host, port, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* ---- the answers -------------------------------------------------------------- */

typedef struct server {
    top_collector_t *c;
    top_snap_t snap;
    int up;                              /* the last snapshot could be taken */
    uint64_t snap_ns;                    /* 0: none yet */
    int serve_all, no_procs;
    int said_unknown;                    /* a client of unknown uid, said once */
} server_t;

/* A response in one buffer: its head, and its body unless head_only. */
static char *response(int status, const char *reason, const char *type, const char *body,
                      size_t blen, int head_only, size_t *len)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", status, reason,
                     type, blen, status == 405 ? "Allow: GET, HEAD\r\n" : "");
    size_t total = (size_t)n + (head_only ? 0 : blen);
    char *out = malloc(total ? total : 1);
    if (!out)
        return NULL;
    memcpy(out, hdr, (size_t)n);
    if (!head_only)
        memcpy(out + n, body, blen);
    *len = total;
    return out;
}

static char *plain(int status, const char *reason, const char *msg, int head_only, size_t *len)
{
    return response(status, reason, "text/plain", msg, strlen(msg), head_only, len);
}

static void refresh(server_t *sv)
{
    uint64_t now = util_now_ns();
    if (sv->snap_ns && now - sv->snap_ns < MIN_SCRAPE_NS)
        return;
    sv->up = top_collect(sv->c, &sv->snap) == 0;
    if (!sv->up)
        top_snap_free(&sv->snap);        /* salus_up 0 and nothing else */
    sv->snap_ns = now;
}

/* /metrics as reader may see it, in a response.  NULL: no memory. */
static char *metrics(server_t *sv, const top_reader_t *r, int head_only, size_t *len)
{
    refresh(sv);
    top_snap_t view;
    if (top_view_for(&sv->snap, r, &view) != 0)
        return NULL;
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    char *out = NULL;
    if (f) {
        top_print_prometheus(f, &view, sv->up);
        if (fclose(f) == 0)
            out = response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, blen,
                           head_only, len);
        free(body);
    }
    top_view_free(&view);
    return out;
}

/* Who is asking on fd, as access.c rules. */
static top_reader_t reader_of(server_t *sv, int fd)
{
    top_reader_t r = { .all = sv->serve_all, .none = sv->no_procs };
    if (!r.all && !r.none)
        r.known = top_peer_uid(fd, &r.uid) == 0;
    if (!r.all && !r.none && !r.known && !sv->said_unknown) {
        sv->said_unknown = 1;
        fprintf(stderr, "salus-top: a client whose user cannot be told (not on loopback) "
                "is served the devices' series only; start salus-top with --serve-all to "
                "serve every process to every client it reaches\n");
    }
    return r;
}

/* The answer to the request head req (NUL-terminated; NULL: unreadable). */
static char *answer(server_t *sv, int fd, const char *req, size_t *len)
{
    static const char index_page[] = "Salus exporter: see /metrics\n";
    char method[16], path[256];
    if (!req || sscanf(req, "%15s %255s", method, path) != 2)
        return plain(400, "Bad Request", "bad request\n", 0, len);
    int head = strcmp(method, "HEAD") == 0;
    path[strcspn(path, "?")] = '\0';
    if (!head && strcmp(method, "GET") != 0)
        return plain(405, "Method Not Allowed", "only GET and HEAD\n", 0, len);
    if (strcmp(path, "/metrics") == 0) {
        top_reader_t r = reader_of(sv, fd);
        char *out = metrics(sv, &r, head, len);
        return out ? out : plain(500, "Internal Server Error", "out of memory\n", head, len);
    }
    if (strcmp(path, "/") == 0)
        return response(200, "OK", "text/plain", index_page, sizeof index_page - 1, head, len);
    return plain(404, "Not Found", "not found: try /metrics\n", head, len);
}

/* ---- connections ---------------------------------------------------------------- */

typedef struct conn {
    int fd;                              /* -1: unused */
    int writing;                         /* 0: reading the request */
    uint64_t deadline;                   /* CLOCK_MONOTONIC ns */
    uint64_t since;                      /* accepted at */
    size_t at;                           /* bytes of in */
    char in[REQUEST_MAX];
    char *out;                           /* the answer, while writing */
    size_t olen, off;
} conn_t;

static void conn_close(conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->out);
    c->fd = -1;
    c->out = NULL;
}

static int head_complete(const conn_t *c)
{
    return strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n");
}

static void conn_write(conn_t *c);

/* Answer c, and send what the socket takes now (most answers fit). */
static void start_answer(server_t *sv, conn_t *c, int readable)
{
    c->out = answer(sv, c->fd, readable ? c->in : NULL, &c->olen);
    if (!c->out) {
        conn_close(c);
        return;
    }
    c->writing = 1;
    c->off = 0;
    c->deadline = util_now_ns() + WRITE_TIMEOUT_NS;
    conn_write(c);
}

/* Read what has come; answer once the head is whole (or too long). */
static void conn_read(server_t *sv, conn_t *c)
{
    for (;;) {
        if (c->at >= sizeof c->in - 1) {
            start_answer(sv, c, 0);      /* too long: not a scrape */
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->at, sizeof c->in - 1 - c->at, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_close(c);               /* gone before asking */
            return;
        }
        c->at += (size_t)n;
        c->in[c->at] = '\0';
        if (head_complete(c)) {
            start_answer(sv, c, 1);
            return;
        }
    }
}

static void conn_write(conn_t *c)
{
    while (c->off < c->olen) {
        ssize_t n = send(c->fd, c->out + c->off, c->olen - c->off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0)
            break;                       /* the client went away */
        c->off += (size_t)n;
    }
    conn_close(c);                       /* all sent (Connection: close), or gone */
}

/* A free entry, making one at the cap: the reader waiting longest goes (a
 * writer is nearly done, and answers are never dropped for a new request). */
static conn_t *conn_slot(conn_t *conns)
{
    conn_t *oldest = NULL;
    for (int i = 0; i < MAX_CONNS; i++) {
        if (conns[i].fd < 0)
            return &conns[i];
        if (!conns[i].writing && (!oldest || conns[i].since < oldest->since))
            oldest = &conns[i];
    }
    if (oldest)
        conn_close(oldest);
    return oldest;
}

static void accept_all(int lfd, conn_t *conns)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;                      /* none left, or out of descriptors */
        conn_t *c = conn_slot(conns);
        if (!c) {
            close(fd);                   /* MAX_CONNS answers being written */
            continue;
        }
        uint64_t now = util_now_ns();
        *c = (conn_t){ .fd = fd, .since = now, .deadline = now + READ_TIMEOUT_NS };
    }
}

/* ---- the loop ----------------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* One round: wait for the listener, a connection or the nearest deadline
 * (at most 500 ms, to look at stop), then serve what is ready and close
 * what is late. */
static void round_once(server_t *sv, int lfd, conn_t *conns)
{
    struct pollfd p[MAX_CONNS + 1];
    int idx[MAX_CONNS + 1], n = 0;
    uint64_t now = util_now_ns(), wake = now + 500ull * 1000000;
    p[n] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    idx[n++] = -1;
    for (int i = 0; i < MAX_CONNS; i++) {
        if (conns[i].fd < 0)
            continue;
        p[n] = (struct pollfd){ .fd = conns[i].fd, .events = conns[i].writing ? POLLOUT : POLLIN };
        idx[n++] = i;
        if (conns[i].deadline < wake)
            wake = conns[i].deadline;
    }
    int ms = wake > now ? (int)((wake - now) / 1000000) + 1 : 0;
    if (poll(p, (nfds_t)n, ms) < 0)
        return;                          /* a signal: look at stop */
    for (int k = 1; k < n; k++) {
        conn_t *c = &conns[idx[k]];
        if (c->fd < 0 || !p[k].revents)
            continue;
        if (c->writing)
            conn_write(c);
        else
            conn_read(sv, c);
    }
    now = util_now_ns();
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].fd >= 0 && now >= conns[i].deadline) {
            if (conns[i].writing)
                conn_close(&conns[i]);   /* too slow to take its answer */
            else
                start_answer(sv, &conns[i], 0);  /* 400, then closed */
        }
    if (p[0].revents)
        accept_all(lfd, conns);
}

int top_serve(top_collector_t *c, const top_serve_opts_t *o)
{
    const char *listen_at = o->listen_at;
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
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "salus-top: serving http://%s%s%s:%s/metrics\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
    conn_t *conns = calloc(MAX_CONNS, sizeof *conns);
    if (!conns) {
        close(lfd);
        fprintf(stderr, "salus-top: out of memory\n");
        return TOP_EXIT_FAIL;
    }
    for (int i = 0; i < MAX_CONNS; i++)
        conns[i].fd = -1;
    server_t sv = { .c = c, .serve_all = o->serve_all, .no_procs = o->no_procs };
    top_snap_init(&sv.snap);
    while (!stop)
        round_once(&sv, lfd, conns);
    for (int i = 0; i < MAX_CONNS; i++)
        conn_close(&conns[i]);
    free(conns);
    close(lfd);
    top_snap_free(&sv.snap);
    return TOP_EXIT_OK;
}
