/* profile.c - the per-op step profile of include/st_profile.h. */
#include "st_profile.h"

#include <stdlib.h>
#include <string.h>

void st_profile_init(st_profile *p) { memset(p, 0, sizeof *p); }

void st_profile_step(st_profile *p) {
    p->mark = st_time();
    p->in_backward = 0;
    p->steps++;
}

/* op names are string constants, but compare the text: two ops may share a name */
static st_prof_op *op_of(st_profile *p, const char *name) {
    for (int i = 0; i < p->n_ops; i++)
        if (p->ops[i].name == name || !strcmp(p->ops[i].name, name)) return &p->ops[i];
    if (p->n_ops == ST_PROF_MAX_OPS) return &p->ops[ST_PROF_MAX_OPS - 1];   /* full: the last row absorbs */
    p->ops[p->n_ops].name = name;
    return &p->ops[p->n_ops++];
}

void st_profile_fwd(st_profile *p, const char *name) {
    const double now = st_time();
    st_prof_op *o = op_of(p, name);
    o->fwd_s += now - p->mark;
    o->fwd_calls++;
    p->mark = now;
}

void st_profile_bwd(st_profile *p, const char *name, double s) {
    st_prof_op *o = op_of(p, name);
    o->bwd_s += s;
    o->bwd_calls++;
}

void st_profile_gemm(st_profile *p, double flops, double s, const char *impl) {
    const int k = p->in_backward != 0;
    p->gemm_flops[k] += flops;
    p->gemm_s[k] += s;
    p->gemm_calls[k]++;
    if (impl && impl[0]) snprintf(p->gemm_impl, sizeof p->gemm_impl, "%s", impl);
}

static int by_total(const void *a, const void *b) {
    const st_prof_op *x = a, *y = b;
    const double tx = x->fwd_s + x->bwd_s, ty = y->fwd_s + y->bwd_s;
    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

void st_profile_print(const st_profile *p, FILE *f) {
    const int steps = p->steps > 0 ? p->steps : 1;
    st_prof_op ops[ST_PROF_MAX_OPS];
    memcpy(ops, p->ops, sizeof ops);
    qsort(ops, (size_t)p->n_ops, sizeof ops[0], by_total);
    double total = p->other_s;
    for (int i = 0; i < p->n_ops; i++) total += ops[i].fwd_s + ops[i].bwd_s;
    fprintf(f, "\nprofile: %d steps, per step (ms); forward = wall time up to the op's tape record\n", p->steps);
    fprintf(f, "  %-24s %10s %10s %10s %7s %7s\n", "op", "forward", "backward", "total", "share", "calls");
    for (int i = 0; i < p->n_ops; i++) {
        const double t = ops[i].fwd_s + ops[i].bwd_s;
        fprintf(f, "  %-24s %10.3f %10.3f %10.3f %6.1f%% %7lld\n", ops[i].name, 1e3 * ops[i].fwd_s / steps,
                1e3 * ops[i].bwd_s / steps, 1e3 * t / steps, total > 0 ? 100.0 * t / total : 0.0,
                (long long)(ops[i].fwd_calls / steps));
    }
    if (p->other_s > 0)
        fprintf(f, "  %-24s %10s %10s %10.3f %6.1f%%\n", "optimizer (update)", "", "", 1e3 * p->other_s / steps,
                total > 0 ? 100.0 * p->other_s / total : 0.0);
    fprintf(f, "  %-24s %10s %10s %10.3f\n", "step", "", "", 1e3 * total / steps);
    const char *phase[2] = {"forward", "backward"};
    fprintf(f, "matmuls (st_mm_gemm, implementation: %s):\n", p->gemm_impl[0] ? p->gemm_impl : "?");
    for (int k = 0; k < 2; k++)
        if (p->gemm_calls[k])
            fprintf(f, "  %-9s %6lld calls/step %10.3f ms/step %9.1f GFLOPS\n", phase[k],
                    (long long)(p->gemm_calls[k] / steps), 1e3 * p->gemm_s[k] / steps,
                    p->gemm_s[k] > 0 ? p->gemm_flops[k] / p->gemm_s[k] * 1e-9 : 0.0);
}
