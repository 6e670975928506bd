/*
 * test_sched_gangname.c - which gang a process is in, from its launcher's
 * variables (sched_gang_name over fake environments; no processes): an
 * explicit SALUS_GANG, torchrun (elastic and static, its restarts), a
 * shell-wide MASTER_ADDR, JAX, Open MPI, PMI, Slurm's steps, names too
 * long for the table, the order of precedence, and libsalus(7) naming
 * every variable of the launchers' one list in that order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/testutil.h"
#include "sched/sched_int.h"

/* ---- fake environments ------------------------------------------------------------ */

static const char *const *fake_env;

static const char *fake_get(const char *name)
{
    for (int i = 0; fake_env[i]; i += 2)
        if (!strcmp(fake_env[i], name))
            return fake_env[i + 1];
    return NULL;
}

/* The gang of env as the table stores it (SCHED_GANG_NAME bytes), NULL:
 * none.  Each call has its own buffer of a few, so that two can be compared. */
static const char *gang_of(const char *const *env)
{
    static char bufs[4][SCHED_GANG_NAME];
    static int at;
    char *buf = bufs[at++ % 4];
    fake_env = env;
    return sched_gang_name(fake_get, buf, SCHED_GANG_NAME) == 0 ? buf : NULL;
}

/* env names the gang `want` (a failure says which it named instead). */
#define assert_gang(env, want)                                                         \
    do {                                                                               \
        const char *got_ = gang_of(env);                                               \
        if (!got_ || strcmp(got_, want))                                               \
            fail_msg("%s: gang \"%s\", not \"%s\"", #env, got_ ? got_ : "(none)", want); \
    } while (0)

/* ---- explicit ------------------------------------------------------------------------ */

static void test_explicit(void **state)
{
    (void)state;
    const char *none[] = { NULL };
    assert_null(gang_of(none));
    const char *salus[] = { "SALUS_GANG", "train-a", "MASTER_ADDR", "h", "MASTER_PORT", "1",
                            "WORLD_SIZE", "2", NULL };
    assert_gang(salus, "train-a");           /* explicit first */
    const char *off[] = { "SALUS_GANG", "off", "TORCHELASTIC_RUN_ID", "x", "WORLD_SIZE", "2",
                          NULL };
    assert_null(gang_of(off));
    const char *nonegang[] = { "SALUS_GANG", "none", "SLURM_JOB_ID", "7", "SLURM_STEP_ID", "0",
                               "SLURM_NTASKS", "2", NULL };
    assert_null(gang_of(nonegang));
    const char *empty[] = { "SALUS_GANG", "", "SLURM_JOB_ID", "5", "SLURM_STEP_ID", "0",
                            "SLURM_NTASKS", "2", NULL };
    assert_gang(empty, "slurm:5.0:w2");       /* empty: as if unset */
    assert_int_not_equal(sched_gang_id("slurm:812.3"), sched_gang_id("slurm:812.4"));
    assert_int_not_equal(sched_gang_id(""), 0);
}

/* ---- torch ------------------------------------------------------------------------------ */

/* A shell-wide MASTER_ADDR/MASTER_PORT is no job: only a size of more than
 * one process makes it a gang's, and the size is part of the name. */
static void test_torch_needs_a_size(void **state)
{
    (void)state;
    const char *shell[] = { "MASTER_ADDR", "10.0.0.2", "MASTER_PORT", "29501", NULL };
    assert_null(gang_of(shell));
    const char *one[] = { "MASTER_ADDR", "10.0.0.2", "MASTER_PORT", "29501", "WORLD_SIZE", "1",
                          NULL };
    assert_null(gang_of(one));
    const char *junk[] = { "MASTER_ADDR", "10.0.0.2", "MASTER_PORT", "29501", "WORLD_SIZE", "4x",
                           NULL };
    assert_null(gang_of(junk));
    const char *addr_only[] = { "MASTER_ADDR", "10.0.0.2", "WORLD_SIZE", "4", NULL };
    assert_null(gang_of(addr_only));
    const char *four[] = { "MASTER_ADDR", "10.0.0.2", "MASTER_PORT", "29501", "WORLD_SIZE", "4",
                           "RANK", "3", NULL };
    const char *two[] = { "MASTER_ADDR", "10.0.0.2", "MASTER_PORT", "29501", "WORLD_SIZE", "2",
                          "RANK", "0", NULL };
    assert_gang(four, "torch:10.0.0.2:29501:w4");
    assert_gang(two, "torch:10.0.0.2:29501:w2");
    assert_string_not_equal(gang_of(four), gang_of(two));     /* never merged */
    /* torchrun's default rendezvous id names no job: its store's address does */
    const char *static_run[] = { "TORCHELASTIC_RUN_ID", "none", "MASTER_ADDR", "10.0.0.2",
                                 "MASTER_PORT", "29501", "WORLD_SIZE", "8",
                                 "TORCHELASTIC_RESTART_COUNT", "0", NULL };
    assert_gang(static_run, "torch:10.0.0.2:29501:w8:r0");
}

/* A restarted generation of torchrun's workers is a gang of its own. */
static void test_torchelastic_restarts(void **state)
{
    (void)state;
    const char *gen0[] = { "TORCHELASTIC_RUN_ID", "3f2a", "MASTER_ADDR", "h", "MASTER_PORT",
                           "29500", "WORLD_SIZE", "4", "TORCHELASTIC_RESTART_COUNT", "0", NULL };
    const char *gen1[] = { "TORCHELASTIC_RUN_ID", "3f2a", "MASTER_ADDR", "h", "MASTER_PORT",
                           "29500", "WORLD_SIZE", "4", "TORCHELASTIC_RESTART_COUNT", "1", NULL };
    const char *shrunk[] = { "TORCHELASTIC_RUN_ID", "3f2a", "MASTER_ADDR", "h", "MASTER_PORT",
                             "29500", "WORLD_SIZE", "3", "TORCHELASTIC_RESTART_COUNT", "1",
                             NULL };
    assert_gang(gen0, "torchelastic:3f2a:w4:r0");
    assert_gang(gen1, "torchelastic:3f2a:w4:r1");
    assert_gang(shrunk, "torchelastic:3f2a:w3:r1");
    assert_int_not_equal(sched_gang_id(gang_of(gen0)), sched_gang_id(gang_of(gen1)));
    const char *alone[] = { "TORCHELASTIC_RUN_ID", "3f2a", "WORLD_SIZE", "1",
                            "TORCHELASTIC_RESTART_COUNT", "0", NULL };
    assert_null(gang_of(alone));                               /* one worker */
}

static void test_jax(void **state)
{
    (void)state;
    const char *jax[] = { "JAX_COORDINATOR_ADDRESS", "10.0.0.3:1234", "SLURM_JOB_ID", "9",
                          "SLURM_STEP_ID", "0", "SLURM_NTASKS", "2", NULL };
    assert_gang(jax, "jax:10.0.0.3:1234");
}

/* ---- MPI, PMI, Slurm ------------------------------------------------------------------ */

static void test_open_mpi(void **state)
{
    (void)state;
    const char *orte[] = { "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "2",
                           "OMPI_MCA_ess_base_jobid", "3735552001", NULL };
    assert_gang(orte, "ompi:3735552001:w4");
    const char *prrte[] = { "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "0",
                            "PMIX_NAMESPACE", "prterun-gpu7-81234@1", NULL };
    assert_gang(prrte, "ompi:prterun-gpu7-81234@1:w2");
    /* hnp URIs are longer than a table's name: its start and a hash of the
     * whole, so that two jobs of one host still differ */
    const char *uri_a[] = { "OMPI_COMM_WORLD_SIZE", "2", "OMPI_MCA_orte_hnp_uri",
                            "3735552000.0;tcp://10.0.0.1,172.17.0.1:39253", NULL };
    const char *uri_b[] = { "OMPI_COMM_WORLD_SIZE", "2", "OMPI_MCA_orte_hnp_uri",
                            "3735552000.0;tcp://10.0.0.1,172.17.0.1:40111", NULL };
    const char *a = gang_of(uri_a), *b = gang_of(uri_b);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(strlen(a), SCHED_GANG_NAME - 1);
    assert_memory_equal(a, "ompi:3735552000.0;tcp:", 22);
    assert_int_equal(a[SCHED_GANG_NAME - 10], '~');
    assert_string_not_equal(a, b);
    const char *alone[] = { "OMPI_COMM_WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "0",
                            "OMPI_MCA_ess_base_jobid", "3735552001", NULL };
    assert_null(gang_of(alone));                               /* mpirun -n 1 */
    const char *nojob[] = { "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "2", NULL };
    assert_null(gang_of(nojob));
    /* a shell-wide MASTER_ADDR does not hide the MPI job under it */
    const char *shell[] = { "MASTER_ADDR", "h", "MASTER_PORT", "29500", "OMPI_COMM_WORLD_SIZE",
                            "4", "OMPI_MCA_ess_base_jobid", "17", NULL };
    assert_gang(shell, "ompi:17:w4");
}

static void test_pmi(void **state)
{
    (void)state;
    const char *pmi[] = { "PMI_SIZE", "4", "PMI_RANK", "1", "PMI_JOBID", "812_3", NULL };
    assert_gang(pmi, "pmi:812_3:w4");
    const char *pmix[] = { "PMI_SIZE", "2", "PMI_RANK", "1", "PMIX_NAMESPACE", "slurm.pmix.9.0",
                           NULL };
    assert_gang(pmix, "pmi:slurm.pmix.9.0:w2");
    const char *nojob[] = { "PMI_SIZE", "4", "PMI_RANK", "1", "PMI_FD", "5", NULL };
    assert_null(gang_of(nojob));
    const char *alone[] = { "PMI_SIZE", "1", "PMI_RANK", "0", "PMI_JOBID", "812_3", NULL };
    assert_null(gang_of(alone));
}

static void test_slurm(void **state)
{
    (void)state;
    const char *step[] = { "SLURM_JOB_ID", "812", "SLURM_STEP_ID", "3", "SLURM_STEP_NUM_TASKS",
                           "2", "SLURM_NTASKS", "8", "SLURM_PROCID", "1", NULL };
    assert_gang(step, "slurm:812.3:w2");     /* the step's size */
    const char *other[] = { "SLURM_JOB_ID", "812", "SLURM_STEP_ID", "4", "SLURM_NTASKS", "2",
                            NULL };
    assert_gang(other, "slurm:812.4:w2");
    const char *single[] = { "SLURM_JOB_ID", "812", "SLURM_STEP_ID", "0", "SLURM_NTASKS", "1",
                             NULL };
    assert_null(gang_of(single));                              /* srun -n 1 */
    const char *single_step[] = { "SLURM_JOB_ID", "812", "SLURM_STEP_ID", "0",
                                  "SLURM_STEP_NUM_TASKS", "1", "SLURM_NTASKS", "8", NULL };
    assert_null(gang_of(single_step));                         /* a 1-task step of a big job */
    const char *batch[] = { "SLURM_JOB_ID", "812", "SLURM_NTASKS", "4", NULL };
    assert_null(gang_of(batch));                               /* the batch script: no step */
    const char *nosize[] = { "SLURM_JOB_ID", "812", "SLURM_STEP_ID", "0", NULL };
    assert_null(gang_of(nosize));
}

/* ---- precedence and the docs ---------------------------------------------------------- */

/* Every rule's variables set at once: the first rule names the gang, and
 * without its identity the next one does, in the list's order. */
static void test_precedence(void **state)
{
    (void)state;
    const char *all[] = { "TORCHELASTIC_RUN_ID", "e1", "MASTER_ADDR", "h", "MASTER_PORT", "1",
                          "WORLD_SIZE", "2", "JAX_COORDINATOR_ADDRESS", "h:2",
                          "OMPI_COMM_WORLD_SIZE", "2", "OMPI_MCA_ess_base_jobid", "5",
                          "PMI_SIZE", "2", "PMI_JOBID", "6", "SLURM_JOB_ID", "7",
                          "SLURM_STEP_ID", "0", "SLURM_NTASKS", "2", NULL };
    static const char *const order[] = { "torchelastic", "torch", "jax", "ompi", "pmi", "slurm" };
    enum { N = sizeof all / sizeof all[0] };
    assert_int_equal(sched_gang_rule_count, 6);
    const char *env[N];
    memcpy(env, all, sizeof env);
    for (int r = 0; r < sched_gang_rule_count; r++) {
        const sched_gang_rule_t *rule = &sched_gang_rules[r];
        assert_string_equal(rule->prefix, order[r]);
        const char *g = gang_of(env);
        assert_non_null(g);
        char want[40];
        snprintf(want, sizeof want, "%s:", rule->prefix);
        if (strncmp(g, want, strlen(want)))
            fail_msg("rule %d (%s) should name the gang, not \"%s\"", r, rule->prefix, g);
        for (int i = 0; env[i]; i += 2)          /* unset its identity: rename the variables */
            for (int k = 0; k < 3 && rule->id[k]; k++)
                if (!strcmp(env[i], rule->id[k]))
                    env[i] = "UNSET";
    }
    assert_null(gang_of(env));
    /* SALUS_GANG over all of them */
    const char *explicit[N + 2];
    explicit[0] = "SALUS_GANG";
    explicit[1] = "mine";
    memcpy(explicit + 2, all, sizeof all);
    assert_gang(explicit, "mine");
}

/* The lines of libsalus(7) from SALUS_GANG's entry to the next entry. */
static char *gang_entry(void)
{
    char path[512];
    char *text = tu_read_file(tu_source_path("tools/man/libsalus.7", path, sizeof path), NULL);
    assert_non_null(text);
    char *at = strstr(text, ".BI SALUS_GANG=");
    assert_non_null(at);
    char *end = strstr(at, "\n.TP");
    size_t n = end ? (size_t)(end - at) : strlen(at);
    char *entry = strndup(at, n);
    free(text);
    return entry;
}

/* Where entry names var in bold (".B VAR" or ".BR VAR ,"), or NULL. */
static const char *bold(const char *entry, const char *var)
{
    size_t n = strlen(var);
    for (const char *at = entry; (at = strstr(at, var)) != NULL; at += n) {
        int b = at - entry >= 4 && !strncmp(at - 4, "\n.B ", 4);
        int br = at - entry >= 5 && !strncmp(at - 5, "\n.BR ", 5);
        if ((b && at[n] == '\n') || (br && (at[n] == ' ' || at[n] == '\n')))
            return at;
    }
    return NULL;
}

/* libsalus(7) names every variable of the one list, and each rule's first
 * where its order of precedence puts it. */
static void test_documented(void **state)
{
    (void)state;
    char *entry = gang_entry();
    const char *last = entry;
    for (int r = 0; r < sched_gang_rule_count; r++) {
        const sched_gang_rule_t *rule = &sched_gang_rules[r];
        const char *vars[] = { rule->id[0], rule->id[1], rule->id[2], rule->with,
                               rule->size[0], rule->size[1], rule->gen };
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            if (vars[i] && !bold(entry, vars[i]))
                fail_msg("libsalus(7)'s SALUS_GANG entry does not name %s (rule %s)", vars[i],
                         rule->prefix);
        const char *at = bold(last, rule->id[0]);
        if (!at)
            fail_msg("libsalus(7) names %s before the rules that come first", rule->id[0]);
        last = at;
    }
    free(entry);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explicit),
        cmocka_unit_test(test_torch_needs_a_size),
        cmocka_unit_test(test_torchelastic_restarts),
        cmocka_unit_test(test_jax),
        cmocka_unit_test(test_open_mpi),
        cmocka_unit_test(test_pmi),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
