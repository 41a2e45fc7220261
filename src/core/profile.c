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

/* The row of (op, phase, shape) in `rows` (n of them, at most cap), added when missing;
 * a full table's last row absorbs the rest. */
static st_prof_gemm *gemm_row(st_prof_gemm *rows, int *n, int cap, const st_prof_gemm *g) {
    for (int i = 0; i < *n; i++) {
        st_prof_gemm *r = &rows[i];
        const int same_op = r->op == g->op || (r->op && g->op && !strcmp(r->op, g->op));
        if (same_op && r->phase == g->phase && r->M == g->M && r->N == g->N && r->K == g->K &&
            r->count == g->count && r->ta == g->ta && r->tb == g->tb)
            return r;
    }
    if (*n == cap) return &rows[cap - 1];
    st_prof_gemm *r = &rows[(*n)++];
    *r = *g;
    r->calls = 0;
    r->s = r->flops = 0.0;
    return r;
}

static void gemm_add(st_prof_gemm *to, const st_prof_gemm *g) {
    to->calls += g->calls;
    to->s += g->s;
    to->flops += g->flops;
    snprintf(to->impl, sizeof to->impl, "%s", g->impl);
}

void st_profile_fwd(st_profile *p, const char *name) {
    const double now = st_time();
    st_prof_op *o = op_of(p, name);
    o->fwd_s += now - p->mark;
    o->fwd_calls++;
    p->mark = now;
    /* the forward products since the previous record were this op's */
    for (int i = 0; i < p->n_pending; i++) {
        p->pending[i].op = name;
        gemm_add(gemm_row(p->gemms, &p->n_gemms, ST_PROF_MAX_GEMMS, &p->pending[i]), &p->pending[i]);
    }
    p->n_pending = 0;
}

void st_profile_bwd(st_profile *p, const char *name, double s) {
    st_prof_op *o = op_of(p, name);
    o->bwd_s += s;
    o->bwd_calls++;
}

void st_profile_gemm(st_profile *p, int64_t M, int64_t N, int64_t K, int64_t count, int ta, int tb, double s,
                     const char *impl) {
    const int k = p->in_backward != 0;
    const double flops = 2.0 * (double)M * (double)N * (double)K * (double)count;
    p->gemm_flops[k] += flops;
    p->gemm_s[k] += s;
    p->gemm_calls[k]++;
    if (impl && impl[0]) snprintf(p->gemm_impl, sizeof p->gemm_impl, "%s", impl);
    st_prof_gemm g = {k ? p->bwd_op : NULL, k, ta != 0, tb != 0, M, N, K, count, 1, s, flops, ""};
    snprintf(g.impl, sizeof g.impl, "%s", impl ? impl : "");
    if (k) gemm_add(gemm_row(p->gemms, &p->n_gemms, ST_PROF_MAX_GEMMS, &g), &g);
    else gemm_add(gemm_row(p->pending, &p->n_pending, ST_PROF_PENDING, &g), &g);
}

static int gemm_by_time(const void *a, const void *b) {
    const st_prof_gemm *x = a, *y = b;
    return x->s < y->s ? 1 : x->s > y->s ? -1 : 0;
}

/* The products by (op, phase, shape), slowest total first; forward products that no
 * recorded op claimed (inference) show as "(untaped)". */
static void print_gemms(const st_profile *p, FILE *f, double ref_gflops, int steps) {
    st_prof_gemm rows[ST_PROF_MAX_GEMMS + ST_PROF_PENDING];
    int n = p->n_gemms;
    memcpy(rows, p->gemms, (size_t)n * sizeof rows[0]);
    for (int i = 0; i < p->n_pending; i++) rows[n++] = p->pending[i];
    if (n == 0) return;
    qsort(rows, (size_t)n, sizeof rows[0], gemm_by_time);
    fprintf(f, "matmuls by op and shape (c (M,N) = op(a) (M,K) op(b) (K,N), x batch; per step)");
    if (ref_gflops > 0) fprintf(f, "; %% GEMM = share of the %.1f GFLOPS square GEMM rate of this run", ref_gflops);
    fprintf(f, ":\n  %-8s %-22s %-22s %-5s %6s %9s %8s %7s  %s\n", "phase", "op", "M x N x K", "op", "calls", "ms",
            "GFLOPS", "% GEMM", "implementation");
    for (int i = 0; i < n; i++) {
        const st_prof_gemm *g = &rows[i];
        char shape[48], ops[8];
        int o = snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)g->M, (long long)g->N, (long long)g->K);
        if (g->count > 1 && o > 0 && (size_t)o < sizeof shape)
            snprintf(shape + o, sizeof shape - (size_t)o, " x%lld", (long long)g->count);
        snprintf(ops, sizeof ops, "%c%c", g->ta ? 'T' : 'N', g->tb ? 'T' : 'N');
        const double gf = g->s > 0 ? g->flops / g->s * 1e-9 : 0.0;
        char share[16] = "";
        if (ref_gflops > 0) snprintf(share, sizeof share, "%.0f%%", 100.0 * gf / ref_gflops);
        fprintf(f, "  %-8s %-22s %-22s %-5s %6lld %9.3f %8.1f %7s  %s\n", g->phase ? "backward" : "forward",
                g->op ? g->op : "(untaped)", shape, ops, (long long)(g->calls / steps), 1e3 * g->s / steps, gf,
                share, g->impl);
    }
}

static int by_total(const void *a, const void *b) {
    const st_prof_op *x = a, *y = b;
    const double tx = x->fwd_s + x->bwd_s, ty = y->fwd_s + y->bwd_s;
    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

void st_profile_print(const st_profile *p, FILE *f, double ref_gflops) {
    const int steps = p->steps > 0 ? p->steps : 1;
    st_prof_op ops[ST_PROF_MAX_OPS];
    memcpy(ops, p->ops, sizeof ops);
    qsort(ops, (size_t)p->n_ops, sizeof ops[0], by_total);
    double total = p->other_s;
    for (int i = 0; i < p->n_ops; i++) total += ops[i].fwd_s + ops[i].bwd_s;
    fprintf(f, "\nprofile: %d steps, per step (ms); forward = wall time up to the op's tape record; the rows sum\n"
               "to less than the measured step (training table): work between ops (arena reset, batch views) is\n"
               "not attributed\n", p->steps);
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
    fprintf(f, "  %-24s %10s %10s %10.3f\n", "sum of the rows", "", "", 1e3 * total / steps);
    const char *phase[2] = {"forward", "backward"};
    fprintf(f, "matmuls (st_mm_gemm, implementation: %s):\n", p->gemm_impl[0] ? p->gemm_impl : "?");
    for (int k = 0; k < 2; k++)
        if (p->gemm_calls[k])
            fprintf(f, "  %-9s %6lld calls/step %10.3f ms/step %9.1f GFLOPS\n", phase[k],
                    (long long)(p->gemm_calls[k] / steps), 1e3 * p->gemm_s[k] / steps,
                    p->gemm_s[k] > 0 ? p->gemm_flops[k] / p->gemm_s[k] * 1e-9 : 0.0);
    print_gemms(p, f, ref_gflops, steps);
}
