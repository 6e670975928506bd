/*
 * test_gpucheck_torchfail.c - bench/gpu/check.sh's PyTorch judgements
 * refuse what they must (CHECK_FAKE_BAD makes the test double misbehave):
 * the exit code and each step's line say so.  A binary of its own
 * (test_gpucheck.c says why); the helpers are test_gpucheck_lib.c's.
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

/* Each PyTorch judgement fails on what it must refuse: a graph whose
 * replays differ from eager, freed memory a pool keeps that Salus does not
 * count, an out-of-memory that Salus did not refuse (the driver's), a
 * compiled function with no launches, a shared tensor whose producer does
 * not see its consumer's values.  The exit code says so. */
static void test_torch_judgements_fail(void **state)
{
    (void)state;
    if (!all_built())
        skip();
    char out[600];
    int rc = run_check("bad", "torch-graph,torch-retain,torch-six,torch-compile,torch-ipc",
                       "graph,retain,six,compile,ipc", out, sizeof out);
    assert_int_equal(rc, 1);
    expect_step(out, "torch-graph", "FAIL");
    expect_step(out, "torch-retain", "FAIL");
    expect_step(out, "torch-six", "FAIL");
    expect_step(out, "torch-compile", "FAIL");
    expect_step(out, "torch-ipc", "FAIL");
    char status[8], fig[2048];
    step_line(out, "torch-six", status, fig, sizeof fig);
    assert_non_null(strstr(fig, "driver OOM: [5]"));
    step_line(out, "torch-retain", status, fig, sizeof fig);
    assert_non_null(strstr(fig, "memory_reserved 1024 MiB, Salus counts 0 MiB"));
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_judgements_fail),
    };
    return cmocka_run_group_tests_name("gpucheck_torchfail", tests, setup_programs, NULL);
}
