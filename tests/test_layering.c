/*
 * test_layering.c - no loop between the files of a module, and none between
 * modules: mk/circles.py over libsalus's objects, one test per module and
 * one for the module graph (docs/hacking.md: a file depends on another when
 * it calls or reads a name only that one defines).  A loop fails with the
 * names that make it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static void check(const char *only)
{
    char cmd[512], line[512], out[8192] = "";
    snprintf(cmd, sizeof cmd, "python3 %s --only %s %s 2>&1", LAYER_SCRIPT, only, LAYER_OBJS);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof line, p))
        if (strlen(out) + strlen(line) < sizeof out)
            strcat(out, line);
    int st = pclose(p);
    printf("%s", out);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s has a dependency loop (see above)", only);
}

#define MODULE_TEST(m) static void test_##m(void **state) { (void)state; check(#m); }
MODULE_TEST(intercept)
MODULE_TEST(sched)
MODULE_TEST(memory)
MODULE_TEST(vmem)
MODULE_TEST(ipc)
MODULE_TEST(drv)
MODULE_TEST(util)
MODULE_TEST(modules)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intercept), cmocka_unit_test(test_sched),
        cmocka_unit_test(test_memory),    cmocka_unit_test(test_vmem),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_drv),       cmocka_unit_test(test_util),
        cmocka_unit_test(test_modules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
