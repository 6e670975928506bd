/*
 * hooks.c - the hook table: what the list (hooks.list) says of each wrapped
 * export, as arrays indexed by hook id, and the lookup by name.  Pure data
 * at the bottom of the module: every other file of intercept may use it,
 * and it uses none of them.  (The wrappers' addresses are resolver.c's
 * hook_wrappers, beside the two wrappers defined there.)  Read-only; no lock.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <string.h>

#define NAME_(cat, export, ...) #export,
const char *const hook_names[HOOK_COUNT] = { HOOK_LIST(NAME_) };

#define CATEGORY_(cat, export, ...) HOOK_CAT_##cat,
const hook_category_t hook_categories[HOOK_COUNT] = { HOOK_LIST(CATEGORY_) };

const char *const hook_category_names[HOOK_CAT_COUNT] = {
    "LAUNCH", "SYNC", "ALLOC", "FREE", "INFO", "LIFE", "CAPTURE", "MEMOP", "COPY", "RESOLVE",
};

#define BASE_(cat, export, base, ...) #base,
const char *const hook_bases[HOOK_COUNT] = { HOOK_LIST(BASE_) };

#define VERSION_(cat, export, base, version, ...) version,
const int hook_versions[HOOK_COUNT] = { HOOK_LIST(VERSION_) };

#define PER_THREAD_(cat, export, base, version, pt, ...) pt,
const unsigned char hook_per_thread[HOOK_COUNT] = { HOOK_LIST(PER_THREAD_) };

int hook_find(const char *export_name)
{
    int lo = 0, hi = HOOK_COUNT;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(hook_names[mid], export_name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The ids of the LAUNCH exports, for summing a block's launches. */
#define LAUNCH_ID_(cat, export, ...) LAUNCH_ID_##cat(export)
#define LAUNCH_ID_LAUNCH(export) HOOK_##export,
#define LAUNCH_ID_SYNC(export)
#define LAUNCH_ID_ALLOC(export)
#define LAUNCH_ID_FREE(export)
#define LAUNCH_ID_INFO(export)
#define LAUNCH_ID_LIFE(export)
#define LAUNCH_ID_CAPTURE(export)
#define LAUNCH_ID_MEMOP(export)
#define LAUNCH_ID_COPY(export)
#define LAUNCH_ID_RESOLVE(export)
const hook_id_t hook_launch_ids[HOOK_LAUNCHES] = { HOOK_LIST(LAUNCH_ID_) };
