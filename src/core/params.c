/* params.c - the flat parameter block. Parameters, gradients and AdamW moments are four
 * blocks of the same layout, so zero-grad, the optimizer and checkpoints are flat loops. */
#include "st_tensor.h"
#include "st_matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_params_init(st_params *p) { memset(p, 0, sizeof *p); }

int st_params_add(st_params *p, const char *name, int ndim, const int64_t *shape,
                  int decay, int init, float init_value) {
    ST_ASSERT(!p->finalized);
    ST_ASSERT(ndim >= 1 && ndim <= 4);
    if (p->count == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        st_param_info *grown = realloc(p->info, (size_t)p->cap * sizeof *p->info);
        if (!grown) st_oom_exit("the parameter table", (size_t)p->cap * sizeof *p->info);
        p->info = grown;
    }
    st_param_info *in = &p->info[p->count];
    memset(in, 0, sizeof *in);
    snprintf(in->name, sizeof in->name, "%s", name);
    in->ndim = ndim;
    in->numel = 1;
    for (int i = 0; i < 4; i++) in->shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++) in->numel *= (size_t)shape[i];
    /* 16-float (64-byte) alignment of every parameter keeps SIMD loads aligned */
    in->offset = p->n;
    p->n += (in->numel + 15) & ~(size_t)15;
    in->decay = decay;
    in->init = init;
    in->init_value = init_value;
    return p->count++;
}

int st_params_finalize(st_params *p, st_error *e) {
    size_t bytes = (p->n ? p->n : 16) * sizeof(float);
    const int train = !p->weights_only;   /* inference holds the weights only */
    int ok = (p->data = st_aligned_alloc(bytes, e)) != NULL;
    if (ok && train) ok = (p->grad = st_aligned_alloc(bytes, e)) && (p->m = st_aligned_alloc(bytes, e)) &&
                          (p->v = st_aligned_alloc(bytes, e));
    if (ok) ok = (p->tensors = calloc((size_t)(p->count ? p->count : 1), sizeof(st_tensor))) != NULL;
    if (!ok) {
        if (e && !e->code) st_fail(e, ST_ERR_MEMORY, "cannot allocate %zu parameter bytes", (train ? 4 : 1) * bytes);
        return ST_ERR_MEMORY;
    }
    memset(p->data, 0, bytes);
    if (train) { memset(p->grad, 0, bytes); memset(p->m, 0, bytes); memset(p->v, 0, bytes); }
    for (int i = 0; i < p->count; i++) {
        st_tensor *t = &p->tensors[i];
        st_set_shape(t, p->info[i].ndim, p->info[i].shape);
        t->data = p->data + p->info[i].offset;
        t->grad = train ? p->grad + p->info[i].offset : NULL;
        t->requires_grad = train;
        t->name = p->info[i].name;
    }
    p->finalized = 1;
    return ST_OK;
}

void st_params_init_values(st_params *p, st_rng *rng) {
    for (int i = 0; i < p->count; i++) {
        st_param_info *in = &p->info[i];
        float *d = p->data + in->offset;
        for (size_t k = 0; k < in->numel; k++) {
            switch (in->init) {
            case ST_INIT_ZERO: d[k] = 0.0f; break;
            case ST_INIT_ONE: d[k] = 1.0f; break;
            case ST_INIT_CONST: d[k] = in->init_value; break;
            default: d[k] = in->init_value * st_rng_normal(rng); break;
            }
        }
    }
}

st_tensor *st_param(st_params *p, int index) {
    ST_ASSERT(p->finalized && index >= 0 && index < p->count);
    return &p->tensors[index];
}

int st_params_find(const st_params *p, const char *name) {
    for (int i = 0; i < p->count; i++) if (strcmp(p->info[i].name, name) == 0) return i;
    return -1;
}

/* Zeroing a gradient block of 100+ MiB is memory-bound; one thread per core gets most of
 * the machine's write bandwidth instead of one core's. Fixed slices of 1 Mi floats. */
void st_params_zero_grad(st_params *p) {
    const size_t slice = (size_t)1 << 20, n = p->n;
    const int64_t ns = (int64_t)((n + slice - 1) / slice);
    float *g = p->grad;
    if (!g) return;   /* weights_only: nothing to zero */
    #pragma omp parallel for schedule(static) if (ns > 1)
    for (int64_t s = 0; s < ns; s++) {
        size_t off = (size_t)s * slice;
        memset(g + off, 0, (n - off < slice ? n - off : slice) * sizeof(float));
    }
}

int st_params_enable_bf16(st_params *p, st_error *e) {
    ST_ASSERT(p->finalized);
    if (!p->bf16) {
        p->bf16 = st_aligned_alloc((p->n ? p->n : 16) * sizeof(uint16_t), e);
        p->bf16_ver = p->bf16 ? st_calloc(1, sizeof *p->bf16_ver, e) : NULL;
        if (!p->bf16_ver) {
            st_aligned_free(p->bf16);
            p->bf16 = NULL;
            return ST_ERR_MEMORY;
        }
        for (int i = 0; i < p->count; i++) {
            p->tensors[i].bf16 = p->bf16 + p->info[i].offset;
            p->tensors[i].bf16_ver = p->bf16_ver;
        }
    }
    st_params_refresh_bf16(p);
    return ST_OK;
}

void st_params_refresh_bf16(st_params *p) {
    if (!p->bf16) return;
    st_bf16_round(p->bf16, p->data, (int64_t)p->n);
    ++*p->bf16_ver;
}

void st_params_free(st_params *p) {
    st_aligned_free(p->bf16);
    free(p->bf16_ver);
    st_aligned_free(p->data); st_aligned_free(p->grad);
    st_aligned_free(p->m); st_aligned_free(p->v);
    free(p->tensors);
    free(p->info);
    memset(p, 0, sizeof *p);
}
