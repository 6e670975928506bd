/*
 * test_gpucheck_torch.c - bench/gpu/check.sh's PyTorch steps (torch-graph,
 * torch-retain, torch-six, torch-compile, torch-loader, torch-ipc) over
 * simgpu, with a test double (tests/clients/fake_torch_sharing.py) in
 * PyTorch's place, so that the peers, barriers, SIGKILLs, reports and
 * judgements all run: all pass.  A binary of its own (test_gpucheck.c says
 * why); the helpers are test_gpucheck_lib.c's.
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
#include "test_gpucheck_lib.h"

/* check.sh's PyTorch steps around the test double (torch-sharing) over
 * simgpu: all pass, with their figures; summary.md their table,
 * summary.json their counts (6 of check.sh's 19). */
static void test_torch_steps(void **state)
{
    (void)state;
    if (!all_built())
        skip();
    char out[600], status[8], fig[2048];
    int rc = run_check("torch", "torch-sharing", NULL, out, sizeof out);
    assert_true(rc == 0 || rc == 1);

    /* The PyTorch steps around the test double: all pass over simgpu. */
    static const char *const torch_steps[] = { "torch-graph", "torch-retain", "torch-six",
                                               "torch-compile", "torch-loader", "torch-ipc" };
    for (int i = 0; i < 6; i++)
        expect_step(out, torch_steps[i], "PASS");
    step_line(out, "torch-six", status, fig, sizeof fig);
    assert_non_null(strstr(fig, "driver OOM: none"));
    assert_null(strstr(fig, "driver free while held: n/a"));
    step_line(out, "torch-loader", status, fig, sizeof fig);
    assert_null(strstr(fig, "n/a"));

    /* The table and the counts. */
    expect_summary(out, rc, "| torch-", 6, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_steps),
    };
    return cmocka_run_group_tests_name("gpucheck_torch", tests, setup_programs, NULL);
}
