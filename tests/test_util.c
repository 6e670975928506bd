/*
 * test_util.c - the shared helpers of libsalus: size parsing, the one list
 * of SALUS_* variables and its readers (accepted forms, rejected forms and
 * their message, said once), the log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static void test_sizes_accepted(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(util_parse_size("0", 0, &v), 0);        assert_int_equal(v, 0);
    assert_int_equal(util_parse_size("4096", 0, &v), 0);     assert_int_equal(v, 4096);
    assert_int_equal(util_parse_size("1K", 0, &v), 0);       assert_int_equal(v, 1024);
    assert_int_equal(util_parse_size("512m", 0, &v), 0);     assert_int_equal(v, 512ull << 20);
    assert_int_equal(util_parse_size("2G", 0, &v), 0);       assert_int_equal(v, 2ull << 30);
    assert_int_equal(util_parse_size("2GiB", 0, &v), 0);     assert_int_equal(v, 2ull << 30);
    assert_int_equal(util_parse_size("1.5G", 0, &v), 0);     assert_int_equal(v, 3ull << 29);
    assert_int_equal(util_parse_size("1T", 0, &v), 0);       assert_int_equal(v, 1ull << 40);
    assert_int_equal(util_parse_size("25%", 16ull << 30, &v), 0);
    assert_int_equal(v, 4ull << 30);
    assert_int_equal(util_parse_size("100%", 1000, &v), 0);  assert_int_equal(v, 1000);
}

static void test_sizes_rejected(void **state)
{
    (void)state;
    uint64_t v = 77;
    const char *bad[] = { "", "-1", "G", "12X", "1.5", "5%%", "0%", "101%", " 1G",
                          "1G ", "1e400", "1Gb2", NULL };
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(util_parse_size(bad[i], 1000, &v), -1);
        assert_int_equal(v, 77);   /* out-parameter untouched */
    }
    /* A percentage needs a whole to be a percentage of. */
    assert_int_equal(util_parse_size("50%", 0, &v), -1);
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
    char why[256];

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
    assert_non_null(strstr(captured, "not 0"));
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
    assert_int_equal(util_var_check(UTIL_VAR_COUNT, "1", why, sizeof why), -1);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_accepted),
        cmocka_unit_test(test_sizes_rejected),
        cmocka_unit_test(test_var_list),
        cmocka_unit_test(test_var_readers),
        cmocka_unit_test(test_log_levels),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
