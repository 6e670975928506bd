/*
 * audit.c - one line to the system log for every change an administrator
 * makes through the tools (a renice, a memory limit, a kill, a policy, a
 * reset): who made it (user and uid, the tool), what it changed and how it
 * ended, and when (RFC 3339 UTC, besides the log's own stamp), so that
 * "who set this job's limit to 1G?" has an answer.
 *
 * Divided into: the line; writing it.
 *
 * The log is syslog(3), facility authpriv (where sudo and su write), level
 * notice, tag "salus" with the tool's pid: journald and rsyslog keep it;
 * on a machine with neither (no /dev/log) the line is lost, as syslog loses
 * it, and the tool goes on.  A change that was refused is audited too.
 * Single-threaded tools: no lock.
 */
#include "top.h"

#include <errno.h>
#include <stdarg.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* ---- the line ------------------------------------------------------------------ */

static void now_text(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* ---- writing it ------------------------------------------------------------------ */

void top_audit(const char *fmt, ...)
{
    char what[512], user[TOP_USER_BYTES], when[40];
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    top_sanitize(what);
    top_user_name(getuid(), user, sizeof user);
    now_text(when, sizeof when);
    openlog("salus", LOG_PID, LOG_AUTHPRIV);
    syslog(LOG_NOTICE, "audit: %s (uid %u) with %s at %s: %s", user, (unsigned)getuid(),
           program_invocation_short_name, when, what);
    closelog();
    errno = saved;
}
