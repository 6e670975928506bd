/*
 * test_layering.c - no loop between the files of a module, and none between
 * modules: mk/circles.py over libsalus's objects, one test per module and
 * one for the module graph (docs/hacking.md: a file depends on another when
 * it calls or reads a name only that one defines).  A loop fails with the
 * names that make it.
 *
 * circles.py runs once, in the group's set-up, over every module (each run
 * reads every object with nm: seven runs took 20-35 s on a loaded machine);
 * each test then judges its own module from that run's lines, as the
 * script's --only <module> would: a module fails when a line says its files
 * depend on each other, the module graph when a line says modules do, and
 * every test fails when the script exited non-zero without saying which
 * loop (it could not run, or a message changed), or printed no summary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static char out[16384];
static int status = -1;

static int run_circles(void **state)
{
    (void)state;
    char cmd[512], line[512];
    snprintf(cmd, sizeof cmd, "python3 %s %s 2>&1", LAYER_SCRIPT, LAYER_OBJS);
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;                     /* each test then says so */
    while (fgets(line, sizeof line, p))
        if (strlen(out) + strlen(line) < sizeof out)
            strcat(out, line);
    status = pclose(p);
    return 0;
}

/* The lines of the run that name a loop of `only` (a module, or "modules"). */
static int loops_of(const char *only)
{
    char needle[96];
    if (strcmp(only, "modules") == 0)
        snprintf(needle, sizeof needle, "circles: modules depend on each other");
    else
        snprintf(needle, sizeof needle, "circles: files of %s depend on each other", only);
    int n = 0;
    for (const char *at = out; (at = strstr(at, needle)) != NULL; at += strlen(needle))
        n++;
    return n;
}

static void check(const char *only)
{
    int exited = status != -1 && WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
    if (status == -1)
        fail_msg("mk/circles.py could not be run");
    int mine = loops_of(only);
    if (mine) {
        printf("%s", out);
        fail_msg("%s has a dependency loop (see above)", only);
    }
    int any = strstr(out, "depend on each other") != NULL;
    if (!exited || (code != 0 && !any) || (code == 0 && !strstr(out, "no loop"))) {
        printf("%s", out);
        fail_msg("mk/circles.py exited %d without naming a loop (see above)", code);
    }
}

#define MODULE_TEST(m) static void test_##m(void **state) { (void)state; check(#m); }
MODULE_TEST(intercept)
MODULE_TEST(nvml)
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
        cmocka_unit_test(test_intercept), cmocka_unit_test(test_nvml),
        cmocka_unit_test(test_sched),
        cmocka_unit_test(test_memory),    cmocka_unit_test(test_vmem),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_drv),       cmocka_unit_test(test_util),
        cmocka_unit_test(test_modules),
    };
    return cmocka_run_group_tests(tests, run_circles, NULL);
}
