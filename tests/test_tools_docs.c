/*
 * test_tools_docs.c - what a user reads and installs: the man pages (every
 * `salus run` option in salus(1) and salus-slurm(8), from the one list),
 * the figures the docs cite from bench/REPORT.md, make install and
 * uninstall, and the Debian package installed into a scratch dpkg root and
 * removed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/top.h"
#include "lib/testutil.h"
#include "test_tools_json.h"
#include "test_tools_lib.h"

/* ---- pages and install ----------------------------------------------------------------- */

/* A line of a man page that starts with .B (.B, .BI, .BR) and names
 * `opt` (roff-escaped, "\\-\\-mem\\-wait") whole: not "\\-\\-mem" in
 * "\\-\\-mem\\-wait". */
static int has_option_entry(const char *text, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = text; (p = strstr(p, opt)) != NULL; p += n) {
        const char *bol = p;
        while (bol > text && bol[-1] != '\n')
            bol--;
        char next = p[n];
        if (strncmp(bol, ".B", 2) == 0 && next != '\\' && next != '-' &&
            !(next >= 'a' && next <= 'z') && !(next >= '0' && next <= '9'))
            return 1;
    }
    return 0;
}

/* "\\-\\-" prefix then name, each '-' escaped as roff wants it. */
static void roff_option(const char *prefix, const char *name, char *buf, size_t len)
{
    char whole[96];
    snprintf(whole, sizeof whole, "%s%s", prefix, name);
    size_t at = (size_t)snprintf(buf, len, "\\-\\-");
    for (const char *c = whole; *c && at + 3 < len; c++) {
        if (*c == '-')
            buf[at++] = '\\';
        buf[at++] = *c;
    }
    buf[at] = '\0';
}

/* Every option of `salus run` (the rows of libsalus's one list of variables
 * that have one) has an entry in salus(1), and every one the Slurm plugin
 * registers (all but --table and --name: the plugin names the table, the
 * job its step) one in salus-slurm(8) as --salus-<option>. */
static void test_run_options_documented(void **state)
{
    (void)state;
    char path[512];
    char *run = tu_read_file(tu_source_path("tools/man/salus.1", path, sizeof path), NULL);
    char *slurm = tu_read_file(tu_source_path("tools/man/salus-slurm.8", path, sizeof path),
                               NULL);
    assert_non_null(run);
    assert_non_null(slurm);
    int missing = 0;
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        char opt[96];
        if (!util_vars[i].option)
            continue;
        roff_option("", util_vars[i].option, opt, sizeof opt);
        if (!has_option_entry(run, opt)) {
            print_error("salus(1) has no entry for salus run %s (%s)\n", opt,
                        util_vars[i].name);
            missing++;
        }
        if (i == UTIL_VAR_TABLE || i == UTIL_VAR_NAME)
            continue;
        roff_option("salus-", util_vars[i].option, opt, sizeof opt);
        if (!has_option_entry(slurm, opt)) {
            print_error("salus-slurm(8) has no entry for %s (%s)\n", opt, util_vars[i].name);
            missing++;
        }
    }
    free(run);
    free(slurm);
    assert_int_equal(missing, 0);
}

/* The part of text from the line that starts with `from` to the next line
 * that starts with `to` (a copy), or NULL. */
static char *section(const char *text, const char *from, const char *to)
{
    const char *a = text ? strstr(text, from) : NULL;
    if (!a)
        return NULL;
    const char *b = strstr(a + strlen(from), to);
    size_t n = b ? (size_t)(b - a) : strlen(a);
    char *out = malloc(n + 1);
    assert_non_null(out);
    memcpy(out, a, n);
    out[n] = '\0';
    return out;
}

/* One source for the policy figures: each figure of the README's "Which
 * policy" (1.58x, 11.04, 12%) is bench/REPORT.md's, and libsalus(7)'s
 * "Which policy" cites the report without copying any. */
static void test_docs_cite_report(void **state)
{
    (void)state;
    char path[512];
    char *readme = tu_read_file(tu_source_path("README.md", path, sizeof path), NULL);
    char *report = tu_read_file(tu_source_path("bench/REPORT.md", path, sizeof path), NULL);
    char *page = tu_read_file(tu_source_path("tools/man/libsalus.7", path, sizeof path), NULL);
    assert_non_null(report);
    char *which = section(readme, "### Which policy", "\n#");
    char *man = section(page, ".SS \"Which policy\"", "\n.S");
    assert_non_null(which);
    assert_non_null(man);
    regex_t figure;
    assert_int_equal(regcomp(&figure, "[0-9]+\\.[0-9]+x?|[0-9]+%", REG_EXTENDED), 0);
    regmatch_t m;
    int seen = 0;
    for (const char *at = which; regexec(&figure, at, 1, &m, 0) == 0; at += m.rm_eo) {
        char fig[32];
        snprintf(fig, sizeof fig, "%.*s", (int)(m.rm_eo - m.rm_so), at + m.rm_so);
        if (!tt_contains(report, fig))
            fail_msg("README's \"Which policy\" says %s, which bench/REPORT.md does not", fig);
        seen++;
    }
    assert_true(seen >= 8);                   /* the table's figures were found */
    if (regexec(&figure, man, 1, &m, 0) == 0)
        fail_msg("libsalus(7)'s \"Which policy\" copies a figure (%.*s): cite "
                 "bench/REPORT.md instead", (int)(m.rm_eo - m.rm_so), man + m.rm_so);
    regfree(&figure);
    free(which);
    free(man);
    free(readme);
    free(report);
    free(page);
}

static void test_man_pages(void **state)
{
    (void)state;
    char groff[512];
    if (!tt_which("groff", groff, sizeof groff)) {
        print_message("groff is not installed\n");
        skip();
    }
    static const char *const pages[] = { "tools/man/salus.1", "tools/man/salus-top.1",
                                         "tools/man/libsalus.7", "tools/man/salus-slurm.8",
                                         NULL };
    for (int i = 0; pages[i]; i++) {
        char path[512];
        char *argv[] = { groff, "-man", "-Tutf8", "-ww", "-z",
                         (char *)tu_source_path(pages[i], path, sizeof path), NULL };
        tu_proc_t p;
        int rc = tu_run(argv, NULL, 20000, &p);
        char *err = tu_read_file(p.err_path, NULL);
        if (rc != 0 || !err || err[0])
            fail_msg("groff warns about %s: %s", pages[i], err ? err : "");
        free(err);
    }
    /* libsalus(7) documents every variable of libsalus's one list... */
    char src[512], page[512], cmd[1400];
    char *text = tu_read_file(tu_source_path("tools/man/libsalus.7", page, sizeof page), NULL);
    assert_non_null(text);
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        char entry[160];
        snprintf(entry, sizeof entry, ".BI %s=", util_vars[i].name);
        if (!tt_contains(text, entry))
            fail_msg("libsalus(7) has no entry \"%s\" for %s", entry, util_vars[i].name);
    }
    /* ...and every policy of the scheduler's one list. */
    for (int i = 0; i < SCHED_POLICY_COUNT; i++) {
        char entry[160];
        snprintf(entry, sizeof entry, ".B %s\n", sched_policy_names[i]);
        if (!tt_contains(text, entry))
            fail_msg("libsalus(7) has no entry \"%s\" for the policy", entry);
    }
    free(text);
    /* ...and no module reads a SALUS_ variable around the list. */
    tu_source_path("src", src, sizeof src);
    snprintf(cmd, sizeof cmd, "grep -rnE '(getenv|util_env_str) *\\(\"SALUS_' %s", src);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[512];
    if (fgets(line, sizeof line, f))
        fail_msg("a SALUS_ variable read outside util/vars.h's list: %s", line);
    pclose(f);
}

static void test_install(void **state)
{
    (void)state;
    tt_need_build();
    char make[512], root[512], dest[600];
    if (!tt_which("make", make, sizeof make))
        skip();
    tu_source_path("", root, sizeof root);
    snprintf(dest, sizeof dest, "DESTDIR=%s/inst", tu_tmpdir());
    /* What the build made is installed as it is: -o keeps make from rebuilding
     * it (files may be mid-edit while the tests run in a working tree).  The
     * build is this binary's own (build/, or build-debug/ under DEBUG=1). */
    char bdir[512], b[600], lib[600], bin[600], top[600];
    tu_build_path("", bdir, sizeof bdir);
    bdir[strlen(bdir) - 1] = '\0';                       /* the trailing '/' */
    const char *name = strrchr(bdir, '/') ? strrchr(bdir, '/') + 1 : bdir;
    snprintf(b, sizeof b, "B=%s", name);
    snprintf(lib, sizeof lib, "%s/libsalus.so", name);
    snprintf(bin, sizeof bin, "%s/bin/salus", name);
    snprintf(top, sizeof top, "%s/bin/salus-top", name);
    char *argv[] = { make, "--no-print-directory", "-C", root, b, "-o", lib, "-o", bin,
                     "-o", top, "tools-install", dest, "PREFIX=/opt/salus", NULL };
    tu_proc_t p;
    int rc = tu_run(argv, NULL, 100000, &p);
    if (rc != 0) {
        char *err = tu_read_file(p.err_path, NULL);
        fail_msg("make tools-install: rc %d: %s", rc, err ? err : "");
    }
    static const char *const files[] = { "bin/salus", "bin/salus-top", "lib/libsalus.so",
        "share/man/man1/salus.1", "share/man/man1/salus-top.1", "share/man/man7/libsalus.7",
        "share/man/man8/salus-slurm.8", NULL };
    for (int i = 0; files[i]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/inst/opt/salus/%s", tu_tmpdir(), files[i]);
        if (access(path, R_OK) != 0)
            fail_msg("make install did not put %s in place", path);
    }
    /* the installed salus preloads the installed library */
    char salus[1024], envbin[512], want[1200];
    snprintf(salus, sizeof salus, "%s/inst/opt/salus/bin/salus", tu_tmpdir());
    if (!tt_which("env", envbin, sizeof envbin))
        return;
    char *run[] = { salus, "run", "--", envbin, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_PRELOAD");
    rc = tu_run(run, &env, 10000, &p);
    tu_env_free(&env);
    assert_int_equal(rc, 0);
    char *out = tu_read_file(p.out_path, NULL);
    snprintf(want, sizeof want, "LD_PRELOAD=%s/inst/opt/salus/lib/libsalus.so\n", tu_tmpdir());
    if (!tt_contains(out, want))
        fail_msg("installed salus run: want %s in %s", want, out ? out : "");
    free(out);
}

/* make's list of what install puts under PREFIX (mk/package.mk), one path a
 * line; its count. */
static int installed_list(char paths[][96], int max)
{
    char make[512], root[512];
    assert_non_null(tt_which("make", make, sizeof make));
    tu_source_path("", root, sizeof root);
    char *argv[] = { make, "--no-print-directory", "-s", "-C", root, "installed-list", NULL };
    tu_proc_t p;
    assert_int_equal(tu_run(argv, NULL, 30000, &p), 0);
    char *out = tu_read_file(p.out_path, NULL);
    int n = 0;
    for (char *line = out, *nl; line && *line && n < max; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        snprintf(paths[n++], 96, "%.*s", (int)(nl - line), line);
    }
    free(out);
    return n;
}

/* make's target `what` on the build of this binary (B=), with what the
 * build made kept as it is (-o, as test_install). */
static void make_target(const char *what, const char *dest, const char *prefix)
{
    char make[512], root[512], bdir[512], b[600], lib[600], bin[600], top[600];
    assert_non_null(tt_which("make", make, sizeof make));
    tu_source_path("", root, sizeof root);
    tu_build_path("", bdir, sizeof bdir);
    bdir[strlen(bdir) - 1] = '\0';
    const char *name = strrchr(bdir, '/') ? strrchr(bdir, '/') + 1 : bdir;
    snprintf(b, sizeof b, "B=%s", name);
    snprintf(lib, sizeof lib, "%s/libsalus.so", name);
    snprintf(bin, sizeof bin, "%s/bin/salus", name);
    snprintf(top, sizeof top, "%s/bin/salus-top", name);
    char *argv[16] = { make, "--no-print-directory", "-C", root, b, "-o", lib, "-o", bin,
                       "-o", top, (char *)what };
    int n = 12;
    if (dest)
        argv[n++] = (char *)dest;
    if (prefix)
        argv[n++] = (char *)prefix;
    argv[n] = NULL;
    /* A make of its own: not a job of the make that runs the tests, whose
     * jobserver's descriptors this process does not pass on. */
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "MAKEFLAGS");
    tu_env_unset(&env, "MFLAGS");
    tu_env_unset(&env, "MAKELEVEL");
    tu_proc_t p;
    int rc = tu_run(argv, &env, 200000, &p);
    tu_env_free(&env);
    if (rc != 0) {
        char *err = tu_read_file(p.err_path, NULL);
        fail_msg("make %s: rc %d: %s", what, rc, err ? err : "");
    }
}

/* make uninstall removes every file of the list that install put there, and
 * the directory of Salus's own it made. */
static void test_uninstall(void **state)
{
    (void)state;
    tt_need_build();
    char dest[4200], path[8192], paths[32][96];
    snprintf(dest, sizeof dest, "DESTDIR=%s/uninst", tu_tmpdir());
    make_target("tools-install", dest, "PREFIX=/opt/salus");
    make_target("package-install", dest, "PREFIX=/opt/salus");
    int n = installed_list(paths, 32);
    assert_true(n >= 10);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/uninst/opt/salus/%s", tu_tmpdir(), paths[i]);
        if (strcmp(paths[i], "lib/spank_salus.so") != 0 && access(path, R_OK) != 0)
            fail_msg("make install did not put %s in place", path);
    }
    snprintf(path, sizeof path, "%s/uninst/opt/salus/lib/systemd/system/salus-exporter.service",
             tu_tmpdir());
    char *unit = tu_read_file(path, NULL);
    assert_true(tt_contains(unit, "ExecStart=/opt/salus/bin/salus-top --listen "));
    free(unit);
    make_target("uninstall", dest, "PREFIX=/opt/salus");
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/uninst/opt/salus/%s", tu_tmpdir(), paths[i]);
        if (access(path, F_OK) == 0)
            fail_msg("make uninstall left %s", path);
    }
    snprintf(path, sizeof path, "%s/uninst/opt/salus/share/doc/salus", tu_tmpdir());
    assert_int_not_equal(access(path, F_OK), 0);
}

/* make deb: a package that dpkg installs (into a scratch database and root,
 * never this machine's) with every file of the list under /usr, whose tools
 * work there, and that dpkg removes whole. */
static void test_deb(void **state)
{
    (void)state;
    tt_need_build();
    char dpkg[512], ddeb[512];
    if (!tt_which("dpkg", dpkg, sizeof dpkg) || !tt_which("dpkg-deb", ddeb, sizeof ddeb)) {
        print_message("dpkg is not installed: make deb needs Debian's dpkg\n");
        skip();
    }
    make_target("deb", NULL, NULL);
    char version[32] = "", deb[4200], root[4200], admin[4300], path[16384], paths[32][96];
    char vpath[512];
    char *v = tu_read_file(tu_source_path("VERSION", vpath, sizeof vpath), NULL);
    assert_non_null(v);
    snprintf(version, sizeof version, "%.*s", (int)strcspn(v, "\n"), v);
    free(v);
    char arch_cmd[] = "dpkg --print-architecture", arch[32] = "";
    FILE *f = popen(arch_cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(arch, sizeof arch, f));
    pclose(f);
    arch[strcspn(arch, "\n")] = '\0';
    char dd[4096];
    tu_build_path("deb", dd, sizeof dd);
    snprintf(deb, sizeof deb, "%s/salus_%s_%s.deb", dd, version, arch);
    assert_int_equal(access(deb, R_OK), 0);
    snprintf(root, sizeof root, "%s/dpkgroot", tu_tmpdir());
    snprintf(admin, sizeof admin, "%s/var/lib/dpkg", root);
    snprintf(path, sizeof path, "mkdir -p %s/info %s/updates && : > %s/status", admin, admin,
             admin);
    assert_int_equal(system(path), 0);
    char rootopt[4400];
    snprintf(rootopt, sizeof rootopt, "--root=%s", root);
    char *inst[] = { dpkg, rootopt, "--force-depends", "--log=/dev/null", "-i", deb, NULL };
    tu_proc_t p;
    int rc = tu_run(inst, NULL, 60000, &p);
    if (rc != 0) {
        char *err = tu_read_file(p.err_path, NULL);
        fail_msg("dpkg -i %s: rc %d: %s", deb, rc, err ? err : "");
    }
    int n = installed_list(paths, 32);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/usr/%s", root, paths[i]);
        if (access(path, R_OK) != 0)
            fail_msg("the package did not install /usr/%s", paths[i]);
    }
    /* the installed salus preloads the installed library; the unit runs the
     * installed salus-top */
    char salus[4400], envbin[512], want[4500];
    snprintf(salus, sizeof salus, "%s/usr/bin/salus", root);
    assert_non_null(tt_which("env", envbin, sizeof envbin));
    char *run[] = { salus, "run", "--", envbin, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_PRELOAD");
    rc = tu_run(run, &env, 10000, &p);
    tu_env_free(&env);
    assert_int_equal(rc, 0);
    char *out = tu_read_file(p.out_path, NULL);
    snprintf(want, sizeof want, "LD_PRELOAD=%s/usr/lib/libsalus.so\n", root);
    if (!tt_contains(out, want))
        fail_msg("packaged salus run: want %s in %s", want, out ? out : "");
    free(out);
    snprintf(path, sizeof path, "%s/usr/lib/systemd/system/salus-exporter.service", root);
    char *unit = tu_read_file(path, NULL);
    assert_true(tt_contains(unit, "ExecStart=/usr/bin/salus-top --listen ${EXPORTER_LISTEN}"));
    free(unit);
    char *rm[] = { dpkg, rootopt, "--log=/dev/null", "-r", "salus", NULL };
    assert_int_equal(tu_run(rm, NULL, 60000, &p), 0);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/usr/%s", root, paths[i]);
        if (access(path, F_OK) == 0)
            fail_msg("dpkg -r left /usr/%s", paths[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_man_pages),
        cmocka_unit_test(test_run_options_documented),
        cmocka_unit_test(test_docs_cite_report),
        cmocka_unit_test(test_install),
        cmocka_unit_test(test_uninstall),
        cmocka_unit_test(test_deb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
