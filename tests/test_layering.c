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
 *
 * A function pointer counts as a dependency (mk/pointers.py): two small
 * modules built here, where the upper one calls the lower and hands it a
 * function of its own to call back, make a loop that the script names;
 * without the pointer they make none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
MODULE_TEST(page)
MODULE_TEST(sched)
MODULE_TEST(memory)
MODULE_TEST(vmem)
MODULE_TEST(ipc)
MODULE_TEST(drv)
MODULE_TEST(util)
MODULE_TEST(modules)

/* ---- the pointer rule, on two modules of its own ------------------------- */

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* circles.py over modules hi and lo (hi calls lo_run; with `handed`, hi also
 * hands lo its hi_cb through lo_set): its exit status, its output in buf. */
static int two_modules(int handed, char *buf, size_t cap)
{
    char dir[] = "/tmp/salus-layering-XXXXXX", cmd[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "mkdir -p %s/src/hi %s/src/lo %s/obj/src/hi %s/obj/src/lo",
             dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/src/lo/lo.c", dir);
    put(path, "static void (*cb)(void);\n"
              "void lo_set(void (*f)(void)) { cb = f; }\n"
              "void lo_run(void) { if (cb) cb(); }\n");
    snprintf(path, sizeof path, "%s/src/hi/hi.c", dir);
    put(path, handed ? "void lo_set(void (*f)(void)); void lo_run(void);\n"
                       "static void hi_cb(void) { }\n"
                       "void hi_start(void) { lo_set(hi_cb); lo_run(); }\n"
                     : "void lo_run(void);\n"
                       "void hi_start(void) { lo_run(); }\n");
    snprintf(cmd, sizeof cmd, "cd %s && cc -O2 -fPIC -c src/lo/lo.c -o obj/src/lo/lo.o && "
             "cc -O2 -fPIC -c src/hi/hi.c -o obj/src/hi/hi.o", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "python3 %s %s/obj/src 2>&1", LAYER_SCRIPT, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(buf, 1, cap - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_pointer_is_an_edge(void **state)
{
    (void)state;
    char buf[4096];
    int rc = two_modules(1, buf, sizeof buf);
    if (rc != 1 || !strstr(buf, "circles: modules depend on each other: hi <-> lo") ||
        !strstr(buf, "lo -> hi  (function pointers: hi_cb via lo_set)")) {
        printf("%s", buf);
        fail_msg("a function handed to another module's setter is no edge (exit %d)", rc);
    }
    rc = two_modules(0, buf, sizeof buf);
    if (rc != 0 || !strstr(buf, "no loop")) {
        printf("%s", buf);
        fail_msg("two modules that only call down make a loop (exit %d)", rc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intercept), cmocka_unit_test(test_nvml),
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_sched),
        cmocka_unit_test(test_memory),    cmocka_unit_test(test_vmem),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_drv),       cmocka_unit_test(test_util),
        cmocka_unit_test(test_modules),   cmocka_unit_test(test_pointer_is_an_edge),
    };
    return cmocka_run_group_tests(tests, run_circles, NULL);
}
