/*
 * test_util.c - the shared helpers of libsalus: size parsing and the
 * SALUS_* readers (accepted forms, rejected forms and their message), the log.
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

static void test_env_readers(void **state)
{
    (void)state;
    int saved;
    uint64_t size = 5;
    long n = 5;
    int choice = 5;
    const char *const words[] = { "fifo", "fair", NULL };

    unsetenv("SALUS_T_SIZE");
    assert_int_equal(util_env_size("SALUS_T_SIZE", 0, &size), 1);
    setenv("SALUS_T_SIZE", "", 1);
    assert_int_equal(util_env_size("SALUS_T_SIZE", 0, &size), 1);
    setenv("SALUS_T_SIZE", "3M", 1);
    assert_int_equal(util_env_size("SALUS_T_SIZE", 0, &size), 0);
    assert_int_equal(size, 3u << 20);

    setenv("SALUS_T_SIZE", "lots", 1);
    capture_begin(&saved);
    assert_int_equal(util_env_size("SALUS_T_SIZE", 100, &size), -1);
    capture_end(saved);
    assert_int_equal(size, 3u << 20);
    assert_non_null(strstr(captured, "SALUS_T_SIZE=\"lots\""));
    assert_non_null(strstr(captured, "percentage"));
    assert_non_null(strstr(captured, "salus["));

    setenv("SALUS_T_LONG", "42", 1);
    assert_int_equal(util_env_long("SALUS_T_LONG", 0, 100, &n), 0);
    assert_int_equal(n, 42);
    setenv("SALUS_T_LONG", "101", 1);
    capture_begin(&saved);
    assert_int_equal(util_env_long("SALUS_T_LONG", 0, 100, &n), -1);
    capture_end(saved);
    assert_int_equal(n, 42);
    assert_non_null(strstr(captured, "from 0 to 100"));
    setenv("SALUS_T_LONG", "4x", 1);
    assert_int_equal(util_env_long("SALUS_T_LONG", 0, 100, &n), -1);

    setenv("SALUS_T_CHOICE", "FAIR", 1);
    assert_int_equal(util_env_choice("SALUS_T_CHOICE", words, &choice), 0);
    assert_int_equal(choice, 1);
    setenv("SALUS_T_CHOICE", "lottery", 1);
    capture_begin(&saved);
    assert_int_equal(util_env_choice("SALUS_T_CHOICE", words, &choice), -1);
    capture_end(saved);
    assert_int_equal(choice, 1);
    assert_non_null(strstr(captured, "one of: fifo, fair"));
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
        cmocka_unit_test(test_env_readers),
        cmocka_unit_test(test_log_levels),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
