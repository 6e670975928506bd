/*
 * test_nvml_list.c - the one list of NVML's hooked functions
 * (src/nvml/nvml.list): gen_nvml.py refuses a list that nvml.h contradicts
 * (a name it does not declare, a prototype of another shape), and
 * libsalus(7) names every hooked function.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "nvml_list.h"

/* ---- the list ------------------------------------------------------------ */

static int gen(const char *list_text, char *err, size_t len)
{
    char list[512], out[512], errf[512], cmd[2048], src[512];
    snprintf(list, sizeof list, "%s/nvml-%d.list", tu_tmpdir(), (int)getpid());
    snprintf(out, sizeof out, "%s/nvml-%d.h", tu_tmpdir(), (int)getpid());
    snprintf(errf, sizeof errf, "%s/nvml-%d.err", tu_tmpdir(), (int)getpid());
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    fputs(list_text, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s %s %s 2>%s",
             tu_source_path("src/nvml/gen_nvml.py", src, sizeof src), list, NVML_H_PATH, out,
             errf);
    int rc = system(cmd);
    char *e = tu_read_file(errf, NULL);
    snprintf(err, len, "%s", e ? e : "");
    free(e);
    unlink(list);
    unlink(out);
    unlink(errf);
    return rc;
}

static void test_generator_checks_header(void **state)
{
    (void)state;
    char err[1024];
    assert_int_equal(gen("nvmlDeviceGetMemoryInfo_v2 MEMORY\n", err, sizeof err), 0);
    assert_int_not_equal(gen("# one\nnvmlDeviceGetMemoryInfo_v9 MEMORY\n", err, sizeof err), 0);
    assert_non_null(strstr(err, ":2: nvmlDeviceGetMemoryInfo_v9 is not declared by nvml.h"));
    assert_int_not_equal(gen("nvmlDeviceGetName MEMORY\n", err, sizeof err), 0);
    assert_non_null(strstr(err, ":1: nvmlDeviceGetName takes 3 parameters"));
    assert_int_not_equal(gen("nvmlDeviceGetMemoryInfo PROCS\n", err, sizeof err), 0);
    assert_non_null(strstr(err, "nvmlDeviceGetMemoryInfo takes 2 parameters"));
}

static void test_man_page_names_every_hook(void **state)
{
    (void)state;
#define NAME_(cat, name, type) #name,
    static const char *const names[] = { NVH_LIST(NAME_) };
    char path[512];
    char *man = tu_read_file(tu_source_path("tools/man/libsalus.7", path, sizeof path), NULL);
    assert_non_null(man);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(man, names[i]))
            fail_msg("libsalus(7) does not name %s (src/nvml/nvml.list)", names[i]);
    free(man);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator_checks_header),
        cmocka_unit_test(test_man_page_names_every_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
