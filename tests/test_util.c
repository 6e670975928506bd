/*
 * test_util.c - the shared helpers of libsalus: size parsing, the one list
 * of SALUS_* variables and its readers (accepted forms, rejected forms and
 * their message, said once), the log, the memory cgroup's room (over fake
 * cgroup trees in a temporary directory: util_cgroup_root).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static void test_sizes_accepted(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(util_parse_size("0", 0, &v), 0);        assert_int_equal(v, 0);
    assert_int_equal(util_parse_size("0G", 0, &v), 0);       assert_int_equal(v, 0);
    assert_int_equal(util_parse_size("1K", 0, &v), 0);       assert_int_equal(v, 1024);
    assert_int_equal(util_parse_size("512m", 0, &v), 0);     assert_int_equal(v, 512ull << 20);
    assert_int_equal(util_parse_size("512MB", 0, &v), 0);    assert_int_equal(v, 512ull << 20);
    assert_int_equal(util_parse_size("2G", 0, &v), 0);       assert_int_equal(v, 2ull << 30);
    assert_int_equal(util_parse_size("2GiB", 0, &v), 0);     assert_int_equal(v, 2ull << 30);
    assert_int_equal(util_parse_size("1.5G", 0, &v), 0);     assert_int_equal(v, 3ull << 29);
    assert_int_equal(util_parse_size("0.5K", 0, &v), 0);     assert_int_equal(v, 512);
    assert_int_equal(util_parse_size("1T", 0, &v), 0);       assert_int_equal(v, 1ull << 40);
    assert_int_equal(util_parse_size("1048576B", 0, &v), 0); assert_int_equal(v, 1ull << 20);
    assert_int_equal(util_parse_size("1073741825B", 0, &v), 0);
    assert_int_equal(v, (1ull << 30) + 1);                   /* exact, not rounded */
    assert_int_equal(util_parse_size("25%", 16ull << 30, &v), 0);
    assert_int_equal(v, 4ull << 30);
    assert_int_equal(util_parse_size("12.5%", 1000, &v), 0); assert_int_equal(v, 125);
    assert_int_equal(util_parse_size("100%", 1000, &v), 0);  assert_int_equal(v, 1000);
    assert_int_equal(util_parse_size("100.0%", 1000, &v), 0); assert_int_equal(v, 1000);
}

static void test_sizes_rejected(void **state)
{
    (void)state;
    uint64_t v = 77;
    const char *bad[] = {
        "", "-1", "+1G", "G", "12X", "1.5", "5%%", "0%", "0.0%", "101%", "100.01%", " 1G",
        "1G ", "1e400", "1Gb2", "1.G", ".5G", "1..5G", "1,5G",
        /* no unit: a bare number but 0, and exact bytes below 1 MiB or fractional */
        "20", "4096", "1048575B", "1.5B", "0B",
        /* strtod's forms: nan, inf, exponents, hex */
        "nan", "nanG", "nan%", "NAN%", "inf%", "infG", "1e-9%", "1e3G", "1E3M", "0x10",
        "0x10M", "0x1p3G",
        /* a % or a unit after other text */
        "12abc%", "1G%", "%", "G%", "1%G", "1iB", "1GiBB", "1Gi B",
        /* too large: more digits than kept, or beyond 1 EiB */
        "1234567890123G", "1.1234567890G", "2000000T",
        NULL };
    for (int i = 0; bad[i]; i++) {
        if (util_parse_size(bad[i], 1000, &v) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 77);   /* out-parameter untouched */
    }
    /* A percentage needs a whole to be a percentage of. */
    assert_int_equal(util_parse_size("50%", 0, &v), -1);
    assert_int_equal(util_parse_size(NULL, 1000, &v), -1);
}

/* Sizes in messages read as people write them; exact bytes at debug only. */
/* Per device, in MPS's form: each ordinal's own value, 1 for an ordinal the
 * list does not name, the plain form for every device; a malformed list is
 * refused whole, and the variable's check names the form. */
static void test_sizes_per_device(void **state)
{
    (void)state;
    uint64_t v = 77;
    assert_int_equal(util_parse_size_at("0=8G,1=16G", 0, 0, &v), 0);
    assert_true(v == 8ull << 30);
    assert_int_equal(util_parse_size_at("0=8G,1=16G", 1, 0, &v), 0);
    assert_true(v == 16ull << 30);
    v = 77;
    assert_int_equal(util_parse_size_at("0=8G,1=16G", 2, 0, &v), 1);
    assert_int_equal(v, 77);
    assert_int_equal(util_parse_size_at("12G", 5, 0, &v), 0);      /* one for all */
    assert_true(v == 12ull << 30);
    assert_int_equal(util_parse_size_at("3=50%", 3, 1000, &v), 0);
    assert_int_equal(v, 500);
    static const char *const bad[] = {
        "0=8G,", "=8G", "0=", "0=8", "0=8G,0=4G", "64=1G", "a=1G", "0=8G;1=2G",
        "00=1G", "-1=1G", "0=8G,,1=2G", "1=nan%", NULL };
    for (int i = 0; bad[i]; i++) {
        v = 77;
        if (util_parse_size_at(bad[i], 0, 1000, &v) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 77);
    }
    char why[512];
    assert_int_equal(util_var_check(UTIL_VAR_MEM_LIMIT, "0=8G,1=16G", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_MEM_LIMIT, "0=8G,1=0", why, sizeof why), -1);
    assert_int_equal(util_var_check(UTIL_VAR_MEM_RESERVE, "0=8G,1=0", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_MEM_LIMIT, "0=8G,0=1G", why, sizeof why), -1);
    assert_non_null(strstr(why, "0=8G,1=16G"));
}

static void test_sizes_shown(void **state)
{
    (void)state;
    int level = util_log_level;
    util_log_level = UTIL_LOG_WARN;
    assert_string_equal(util_size(0).s, "0 B");
    assert_string_equal(util_size(100).s, "100 B");
    assert_string_equal(util_size(1536).s, "1.5 KiB");
    assert_string_equal(util_size(512ull << 20).s, "512 MiB");
    assert_string_equal(util_size(64ull << 20).s, "64 MiB");
    assert_string_equal(util_size(2ull << 30).s, "2.0 GiB");
    assert_string_equal(util_size(3ull << 29).s, "1.5 GiB");
    assert_string_equal(util_size(1ull << 40).s, "1.0 TiB");
    assert_string_equal(util_size(UINT64_MAX).s, "16 EiB");
    util_log_level = UTIL_LOG_DEBUG;
    assert_string_equal(util_size(2ull << 30).s, "2.0 GiB (2147483648 bytes)");
    assert_string_equal(util_size(100).s, "100 B");
    util_log_level = level;
}

/* Run fn with stderr captured; return what it wrote. */
static char captured[4096];
static void capture_begin(int *saved)
{
    fflush(stderr);
    *saved = dup(2);
    char path[] = "/tmp/salus-util-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    dup2(fd, 2);
    close(fd);
}
static void capture_end(int saved)
{
    fflush(stderr);
    off_t len = lseek(2, 0, SEEK_END);
    lseek(2, 0, SEEK_SET);
    ssize_t n = read(2, captured, len < (off_t)sizeof captured - 1 ? (size_t)len : sizeof captured - 1);
    captured[n > 0 ? n : 0] = '\0';
    dup2(saved, 2);
    close(saved);
}

/* The one list: well formed, and its readers apply its rules. */
static void test_var_list(void **state)
{
    (void)state;
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        const util_var_t *v = &util_vars[i];
        assert_non_null(v->name);
        assert_int_equal(strncmp(v->name, "SALUS_", 6), 0);
        assert_non_null(v->help);
        assert_non_null(v->arg);
        if (v->kind == UTIL_KIND_LONG) {
            assert_true(v->min <= v->max);
            assert_true(v->def == 0 || (v->def >= v->min && v->def <= v->max));
        }
        if (v->kind == UTIL_KIND_CHOICE)
            assert_non_null(v->choices);
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(v->name, util_vars[j].name);
            if (v->option && util_vars[j].option)
                assert_string_not_equal(v->option, util_vars[j].option);
        }
    }
    assert_string_equal(util_policy_names[1], "fair");
}

static void test_var_readers(void **state)
{
    (void)state;
    int saved;
    long n = 5;
    int choice = 5;
    char why[512];

    unsetenv("SALUS_PRIORITY");
    assert_int_equal(util_var_long(UTIL_VAR_PRIORITY, &n), 1);
    setenv("SALUS_PRIORITY", "", 1);
    assert_int_equal(util_var_long(UTIL_VAR_PRIORITY, &n), 1);
    setenv("SALUS_PRIORITY", "42", 1);
    assert_int_equal(util_var_long(UTIL_VAR_PRIORITY, &n), 0);
    assert_int_equal(n, 42);
    setenv("SALUS_PRIORITY", "101", 1);
    capture_begin(&saved);
    assert_int_equal(util_var_long(UTIL_VAR_PRIORITY, &n), -1);
    assert_int_equal(util_var_long(UTIL_VAR_PRIORITY, &n), -1);
    capture_end(saved);
    assert_int_equal(n, 42);                               /* untouched */
    assert_non_null(strstr(captured, "SALUS_PRIORITY=\"101\""));
    assert_non_null(strstr(captured, "from 0 to 100"));
    assert_non_null(strstr(captured, "salus["));
    assert_null(strstr(strstr(captured, "from 0 to 100") + 1, "from 0 to 100"));  /* once */
    unsetenv("SALUS_PRIORITY");

    setenv("SALUS_POLICY", "SRTF", 1);
    assert_int_equal(util_var_choice(UTIL_VAR_POLICY, &choice), 0);
    assert_int_equal(choice, 3);
    setenv("SALUS_POLICY", "lottery", 1);
    capture_begin(&saved);
    assert_int_equal(util_var_choice(UTIL_VAR_POLICY, &choice), -1);
    capture_end(saved);
    assert_int_equal(choice, 3);
    assert_non_null(strstr(captured, "one of: fifo, fair, priority, srtf, pack"));
    unsetenv("SALUS_POLICY");

    setenv("SALUS_MEM_LIMIT", "25%", 1);
    assert_string_equal(util_var_text(UTIL_VAR_MEM_LIMIT), "25%");
    setenv("SALUS_MEM_LIMIT", "0", 1);                     /* would refuse everything */
    capture_begin(&saved);
    assert_null(util_var_text(UTIL_VAR_MEM_LIMIT));
    capture_end(saved);
    assert_non_null(strstr(captured, "so is 0"));
    setenv("SALUS_MEM_LIMIT", "20", 1);                    /* 20 bytes? 20G? */
    assert_int_equal(util_var_check(UTIL_VAR_MEM_LIMIT, "20", why, sizeof why), -1);
    assert_non_null(strstr(why, "20G, 512M"));
    assert_non_null(strstr(why, "25%"));
    assert_non_null(strstr(why, "without a unit is refused"));
    unsetenv("SALUS_MEM_LIMIT");
    assert_null(util_var_text(UTIL_VAR_MEM_LIMIT));

    assert_int_equal(util_var_check(UTIL_VAR_MEM_RESERVE, "0", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_MEM_RESERVE, "1.5G", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_MEM_RESERVE, "lots", why, sizeof why), -1);
    assert_non_null(strstr(why, "percentage"));
    assert_int_equal(util_var_check(UTIL_VAR_TABLE, "team.a-1", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_TABLE, "/x/y", why, sizeof why), -1);
    assert_int_equal(util_var_check(UTIL_VAR_NAME, "a\x1b[2J", why, sizeof why), -1);
    assert_int_equal(util_var_check(UTIL_VAR_NAME, "resnet-50", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_QUANTUM_MS, "-1", why, sizeof why), -1);
    assert_non_null(strstr(why, "from 0 to 3600000"));
    /* Whole numbers in digits only: a blank, a '+' or "-0" is a typo or a
     * script's quoting, refused with the form, never read as 5 or 0. */
    static const char *const not_whole[] = { " 5", "5 ", "+5", "-0", "-00", "\t7", "0x10",
                                              "", "-" };
    for (size_t i = 0; i < sizeof not_whole / sizeof *not_whole; i++) {
        why[0] = '\0';
        assert_int_equal(util_var_check(UTIL_VAR_QUANTUM_MS, not_whole[i], why, sizeof why), -1);
        assert_non_null(strstr(why, "in digits with nothing around them"));
    }
    assert_int_equal(util_var_check(UTIL_VAR_QUANTUM_MS, "0", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_QUANTUM_MS, "007", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_QUANTUM_MS, "250", why, sizeof why), 0);
    assert_int_equal(util_var_check(UTIL_VAR_COUNT, "1", why, sizeof why), -1);
}

/* A misspelled SALUS_* variable is named with the nearest known one, once;
 * known names and names far from all of them are left alone. */
static void test_misspelled(void **state)
{
    (void)state;
    size_t n = 0;
    assert_int_equal(util_var_misspelled("SALUS_POLCY=srtf", &n), UTIL_VAR_POLICY);
    assert_int_equal(n, strlen("SALUS_POLCY"));
    assert_int_equal(util_var_misspelled("SALUS_MEMLIMIT=1G", &n), UTIL_VAR_MEM_LIMIT);
    assert_int_equal(util_var_misspelled("SALUS_MEM_RESERV=1G", &n), UTIL_VAR_MEM_RESERVE);
    assert_int_equal(util_var_misspelled("SALUS_priority=3", &n), UTIL_VAR_PRIORITY);
    assert_int_equal(util_var_misspelled("SALUS_MAX_SLICE=9", &n), UTIL_VAR_MAX_SLICE_MS);
    assert_int_equal(util_var_misspelled("SALUS_POLICY=srtf", &n), -1);      /* known */
    assert_int_equal(util_var_misspelled("SALUS_BENCH_BUILD=x", &n), -1);    /* far */
    assert_int_equal(util_var_misspelled("PATH=/bin", &n), -1);
    assert_int_equal(util_var_misspelled("SALUS_", &n), -1);

    int saved;
    setenv("SALUS_POLCY", "srtf", 1);
    setenv("SALUS_QUANTUM_M", "5", 1);
    capture_begin(&saved);
    util_var_warn_misspelled();
    util_var_warn_misspelled();
    capture_end(saved);
    unsetenv("SALUS_POLCY");
    unsetenv("SALUS_QUANTUM_M");
    const char *a = strstr(captured, "SALUS_POLCY is not a variable of Salus");
    assert_non_null(a);
    assert_non_null(strstr(a, "did you mean SALUS_POLICY?"));
    assert_null(strstr(a + 1, "SALUS_POLCY is not"));                     /* once */
    assert_non_null(strstr(captured, "did you mean SALUS_QUANTUM_MS?"));
}

static void test_log_levels(void **state)
{
    (void)state;
    int saved;
    setenv("SALUS_LOG", "info", 1);
    util_log_init();
    assert_int_equal(util_log_level, UTIL_LOG_INFO);
    capture_begin(&saved);
    util_info("shown %d", 1);
    util_debug("hidden %d", 2);
    capture_end(saved);
    assert_non_null(strstr(captured, ": info: shown 1\n"));
    assert_null(strstr(captured, "hidden"));

    static int once;
    capture_begin(&saved);
    for (int i = 0; i < 3; i++)
        util_log_once(&once, UTIL_LOG_WARN, "only once");
    capture_end(saved);
    assert_non_null(strstr(captured, "only once"));
    assert_null(strstr(strstr(captured, "only once") + 1, "only once"));

    setenv("SALUS_LOG", "chatty", 1);
    capture_begin(&saved);
    util_log_init();
    capture_end(saved);
    assert_int_equal(util_log_level, UTIL_LOG_INFO);   /* unchanged */
    assert_non_null(strstr(captured, "SALUS_LOG=\"chatty\""));
}

/* ---- the memory cgroup ---------------------------------------------------------- */

static char cg_root[256];

/* root/rel with `text` in it, its directories made. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", cg_root, rel);
    for (char *p = path + strlen(cg_root) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int cg(util_cgroup_mem_t *c)
{
    memset(c, 0x5a, sizeof *c);
    return util_cgroup_mem(c);
}

static void test_cgroup_room(void **state)
{
    (void)state;
    util_cgroup_mem_t c;
    snprintf(cg_root, sizeof cg_root, "/tmp/salus-test-cg-%d", (int)getpid());
    assert_int_equal(mkdir(cg_root, 0755), 0);
    util_cgroup_root = cg_root;

    /* Nothing there: no bound. */
    assert_int_equal(cg(&c), 1);

    /* v2, no mountinfo: /sys/fs/cgroup; the job's level and its parent's. */
    put("proc/self/cgroup", "0::/jobs/a\n");
    put("sys/fs/cgroup/jobs/a/memory.max", "1048576000\n");
    put("sys/fs/cgroup/jobs/a/memory.current", "848297984\n");
    put("sys/fs/cgroup/jobs/a/memory.stat", "anon 800000000\ninactive_file 1048576\n");
    put("sys/fs/cgroup/jobs/memory.max", "max\n");
    put("sys/fs/cgroup/jobs/memory.current", "900000000\n");
    assert_int_equal(cg(&c), 0);
    assert_int_equal(c.limit, 1048576000);
    assert_int_equal(c.used, 848297984 - 1048576);
    assert_int_equal(c.room, 1048576000 - (848297984 - 1048576));
    assert_false(c.v1);
    assert_non_null(strstr(c.path, "/sys/fs/cgroup/jobs/a"));

    /* A tighter parent is the bound. */
    put("sys/fs/cgroup/jobs/memory.max", "950000000\n");
    assert_int_equal(cg(&c), 0);
    assert_int_equal(c.room, 50000000);
    assert_int_equal(c.limit, 950000000);

    /* Over its limit: no room, not a wrap. */
    put("sys/fs/cgroup/jobs/memory.current", "990000000\n");
    assert_int_equal(cg(&c), 0);
    assert_int_equal(c.room, 0);

    /* "max" everywhere: no bound. */
    put("sys/fs/cgroup/jobs/memory.max", "max\n");
    put("sys/fs/cgroup/jobs/a/memory.max", "max\n");
    assert_int_equal(cg(&c), 1);

    /* Garbage is no bound at its level, and nothing crashes. */
    const char *junk[] = { "", "\n", "-5\n", " 5\n", "5 \n", "12abc", "maxi\n", "0x10\n",
                           "99999999999999999999999\n", "\377\376" };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        put("sys/fs/cgroup/jobs/a/memory.max", junk[i]);
        assert_int_equal(cg(&c), 1);
        put("sys/fs/cgroup/jobs/a/memory.max", "1000\n");
        put("sys/fs/cgroup/jobs/a/memory.current", junk[i]);
        assert_int_equal(cg(&c), 1);
        put("sys/fs/cgroup/jobs/a/memory.current", "10\n");
        put("sys/fs/cgroup/jobs/a/memory.stat", junk[i]);
        assert_int_equal(cg(&c), 0);
        assert_int_equal(c.room, 990);                /* no cache subtracted */
    }
    const char *bad_self[] = { "", "garbage", "0::", "0::relative\n", "0::/../../etc\n",
                               "::::\n" };
    for (size_t i = 0; i < sizeof bad_self / sizeof *bad_self; i++) {
        put("proc/self/cgroup", bad_self[i]);
        assert_int_equal(cg(&c), 1);
    }

    /* v1 (a hybrid host: the memory line wins over 0::), found through
     * mountinfo, a container's mount root stripped; v1's "no limit". */
    put("proc/self/cgroup", "9:pids:/\n4:cpu,memory:/ct/job\n0::/\n");
    put("proc/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
        "35 31 0:32 /ct /m/memcg rw,relatime - cgroup cgroup rw,cpu,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    put("m/memcg/job/memory.limit_in_bytes", "268435456\n");
    put("m/memcg/job/memory.usage_in_bytes", "230686720\n");
    put("m/memcg/job/memory.stat", "cache 1\ntotal_inactive_file 4194304\n");
    put("m/memcg/memory.limit_in_bytes", "9223372036854771712\n");
    put("m/memcg/memory.usage_in_bytes", "999999999999\n");
    assert_int_equal(cg(&c), 0);
    assert_true(c.v1);
    assert_int_equal(c.limit, 268435456);
    assert_int_equal(c.room, 268435456 - (230686720 - 4194304));
    assert_non_null(strstr(c.path, "/m/memcg/job"));

    /* A cgroup outside the mount's root is not read. */
    put("proc/self/cgroup", "4:memory:/other/job\n");
    assert_int_equal(cg(&c), 1);

    util_cgroup_root = NULL;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cg_root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_accepted),
        cmocka_unit_test(test_sizes_rejected),
        cmocka_unit_test(test_sizes_per_device),
        cmocka_unit_test(test_sizes_shown),
        cmocka_unit_test(test_misspelled),
        cmocka_unit_test(test_var_list),
        cmocka_unit_test(test_var_readers),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_cgroup_room),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
