/* registry.c - the task table: one line per task (each defined in its own file in this
 * directory). Adding a task: a new file defining `const st_task st_task_<name>`, a line
 * here, ST_TASK_COUNT (include/st_task.h) one up, its generator checks in tests/test_task.c
 * (expected_answer, a known instance) and its entry in docs/tasks.md. */
#include "st_task.h"

#include <stdio.h>
#include <string.h>

extern const st_task st_task_copy, st_task_reverse, st_task_sort, st_task_addition, st_task_passkey, st_task_mqar,
    st_task_flipflop, st_task_selective_copy, st_task_multikey, st_task_counting, st_task_parity, st_task_vartrack;

static const st_task *const tasks[] = {
    &st_task_copy, &st_task_reverse, &st_task_sort, &st_task_addition,
    &st_task_passkey, &st_task_mqar, &st_task_flipflop, &st_task_selective_copy,
    &st_task_multikey, &st_task_counting, &st_task_parity, &st_task_vartrack,
};
#define N_TASKS ((int)(sizeof tasks / sizeof tasks[0]))
_Static_assert(N_TASKS == ST_TASK_COUNT, "ST_TASK_COUNT (include/st_task.h) must count the registry");

int st_task_count(void) { return N_TASKS; }

const st_task *st_task_at(int i) { return i >= 0 && i < N_TASKS ? tasks[i] : NULL; }

const st_task *st_task_find(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (!strcmp(tasks[i]->name, name)) return tasks[i];
    return NULL;
}

int st_task_index(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (!strcmp(tasks[i]->name, name)) return i;
    return -1;
}

const char *st_task_name_at(int i) { return i >= 0 && i < N_TASKS ? tasks[i]->name : NULL; }

void st_task_list(char *buf, size_t n, uint32_t keys, int needle) {
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < N_TASKS && used < n; i++) {
        if ((tasks[i]->keys & keys) != keys || (needle && !tasks[i]->has_depth)) continue;
        int k = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", tasks[i]->name);
        if (k < 0) break;
        used += (size_t)k;
    }
}

/* specials, digits, then symbols a..z, aa..zz, aaa.. (bijective base 26) */
void st_task_token_name(int32_t id, char *out, size_t n) {
    static const char *special[ST_TT_DIGIT0] = {"<pad>", "=", ".", "+", "|", "?", "_", "W", "I", "R", "K"};
    if (!n) return;
    if (id < 0) { snprintf(out, n, "?%d", (int)id); return; }
    if (id < ST_TT_DIGIT0) { snprintf(out, n, "%s", special[id]); return; }
    if (id < ST_TT_SYMBOL0) { snprintf(out, n, "%d", (int)(id - ST_TT_DIGIT0)); return; }
    char tmp[16];
    int k = 0;
    for (int64_t j = (int64_t)id - ST_TT_SYMBOL0 + 1; j > 0 && k < (int)sizeof tmp; j = (j - 1) / 26)
        tmp[k++] = (char)('a' + (j - 1) % 26);
    size_t w = 0;
    while (k > 0 && w + 1 < n) out[w++] = tmp[--k];
    out[w] = 0;
}
