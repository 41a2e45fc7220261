/* optim.c - AdamW and SGD over the flat parameter block, global gradient-norm clipping.
 *
 * The block is cut once into work items (pieces of one parameter, at most
 * ST_OPTIM_CHUNK floats, with that parameter's decay flag). Every pass is then one
 * `omp parallel for` over items with a plain vectorisable inner loop. Reductions (the
 * gradient norm) store one partial per item and add the partials in item order, so the
 * result does not depend on the thread count or the schedule.
 *
 * With a bf16 shadow (precision bf16), st_optim_step also writes it: each item's new
 * values are rounded right after its update, while the item (<= 128 KiB) is still in
 * cache, instead of a separate pass over the whole block (st_params_refresh_bf16); the
 * ZeRO path updates a shard, gathers, then refreshes.
 *
 * Not here: the learning-rate schedule (schedule.c) and loss scaling for gradient
 * accumulation (the trainer seeds backward with 1/grad_accum). */
#include "st_matmul.h"
#include "st_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* The no_decay group a parameter belongs to (0: none). */
static int decay_group(const st_param_info *in) {
    const char *last = strrchr(in->name, '.');
    if (in->ndim == 1 && last && strcmp(last, ".bias") == 0) return ST_NODECAY_BIAS;
    if (last && strcmp(last, ".weight") == 0) {
        /* the component before ".weight": "blocks.0.ln1" -> "ln1", "ln_f" -> "ln_f",
         * "blocks.0.attn.q_norm" -> "q_norm" (model.qk_norm's gains are norm weights too) */
        const char *comp = last;
        while (comp > in->name && comp[-1] != '.') comp--;
        if (starts_with(comp, "ln") || (last - comp >= 5 && strncmp(last - 5, "_norm", 5) == 0)) return ST_NODECAY_NORM;
    }
    if (in->is_embedding || starts_with(in->name, "tok_emb") || starts_with(in->name, "pos_emb"))
        return ST_NODECAY_EMBEDDING;
    return 0;
}

/* For a member of a no_decay group the option decides, in both directions, whatever
 * the model declared (the model marks biases and norms non-decaying by default, and
 * that default must not outvote a user who removed "bias" from the list). The model's
 * flag decides only for parameters outside the groups (matrices; position-method
 * parameters such as rf_theta, kerple or the T5 table, which never decay). */
int st_param_decays(const st_param_info *in, int no_decay) {
    int group = decay_group(in);
    if (group) return !(no_decay & group);
    return in->decay != 0;
}

int st_optim_init(st_optim *o, const st_optim_config *cfg, const st_params *p, st_error *e) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    int64_t n = 0;
    for (int i = 0; i < p->count; i++)
        n += (int64_t)((p->info[i].numel + ST_OPTIM_CHUNK - 1) / ST_OPTIM_CHUNK);
    o->items = st_calloc((size_t)(n ? n : 1), sizeof *o->items, e);
    o->partial = o->items ? st_calloc((size_t)(n ? n : 1), sizeof *o->partial, e) : NULL;
    if (!o->partial) { st_optim_free(o); return ST_ERR_MEMORY; }
    int64_t k = 0;
    for (int i = 0; i < p->count; i++) {
        const st_param_info *in = &p->info[i];
        int decay = st_param_decays(in, cfg->no_decay);
        for (size_t off = 0; off < in->numel; off += ST_OPTIM_CHUNK) {
            st_optim_item *it = &o->items[k++];
            it->offset = in->offset + off;
            it->len = in->numel - off < ST_OPTIM_CHUNK ? in->numel - off : ST_OPTIM_CHUNK;
            it->decay = decay;
        }
    }
    o->n_items = k;
    return ST_OK;
}

void st_optim_free(st_optim *o) {
    free(o->items);
    free(o->partial);
    memset(o, 0, sizeof *o);
}

/* sum g^2 of one item in double with 8 fixed lanes (vectorises without reassociation). */
static double sumsq(const float *g, size_t n) {
    double acc[8] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)g[j + l] * (double)g[j + l];
    for (; j < n; j++) acc[0] += (double)g[j] * (double)g[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double st_grad_norm(st_optim *o, const st_params *p) {
    const st_optim_item *items = o->items;
    double *part = o->partial;
    const float *grad = p->grad;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < o->n_items; i++)
        part[i] = sumsq(grad + items[i].offset, items[i].len);
    double total = 0;
    for (int64_t i = 0; i < o->n_items; i++) total += part[i];
    return sqrt(total);
}

float st_clip_factor(double norm, float max_norm) {
    return max_norm > 0 && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

float st_clip_grad(st_optim *o, st_params *p, double norm, float max_norm) {
    const float f = st_clip_factor(norm, max_norm);
    if (f == 1.0f) return f;
    const st_optim_item *items = o->items;
    float *grad = p->grad;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < o->n_items; i++) {
        float *g = grad + items[i].offset;
        for (size_t j = 0; j < items[i].len; j++) g[j] *= f;
    }
    return f;
}

/* gs: the clip factor. gj = fl(g[j] gs) is the value st_clip_grad would have stored (and
 * g[j] itself when gs = 1), so clipping here instead of in a pass of its own (8 bytes a
 * parameter, ~10 ms an M step) changes no bit. */
static void adamw_item(float *restrict w, float *restrict m, float *restrict v, const float *restrict g,
                       uint16_t *restrict h, size_t n, float gs, float b1, float b2, float eps, float step_size,
                       float inv_bc2_sqrt, float decay_mul) {
    if (decay_mul != 1.0f)
        for (size_t j = 0; j < n; j++) w[j] *= decay_mul;
    for (size_t j = 0; j < n; j++) {
        const float gj = g[j] * gs;
        m[j] = b1 * m[j] + (1.0f - b1) * gj;
        v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
        w[j] -= step_size * m[j] / (sqrtf(v[j]) * inv_bc2_sqrt + eps);
    }
    if (h) st_bf16_round(h, w, (int64_t)n);   /* one slice: no nested parallel region */
}

/* w - lr * d with one rounding (fmaf): exactly the rounded value of the SGD update. The
 * momentum buffer is fmaf(momentum, buf, fl(g gs)) written out: with the clip factor's
 * product in the same sum, GCC's contraction could otherwise fuse that one instead. */
static void sgd_item(float *restrict w, float *restrict buf, const float *restrict g, uint16_t *restrict h,
                     size_t n, float gs, float lr, float momentum, float decay_mul) {
    if (decay_mul != 1.0f)
        for (size_t j = 0; j < n; j++) w[j] *= decay_mul;
    if (momentum > 0.0f) {
        for (size_t j = 0; j < n; j++) {
            buf[j] = fmaf(momentum, buf[j], g[j] * gs);
            w[j] = fmaf(-lr, buf[j], w[j]);
        }
    } else {
        for (size_t j = 0; j < n; j++) w[j] = fmaf(-lr, g[j] * gs, w[j]);
    }
    if (h) st_bf16_round(h, w, (int64_t)n);
}

/* items [first, end); shadow: p->bf16 to round each item into, or NULL */
static void step_items(st_optim *o, st_params *p, float lr, int64_t t, float gs, int64_t first, int64_t end,
                       float *m, float *v, size_t base, uint16_t *shadow) {
    const st_optim_config *c = &o->cfg;
    const st_optim_item *items = o->items;
    const float decay_mul = 1.0f - lr * c->weight_decay;
    if (c->name == ST_OPT_SGD) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = first; i < end; i++) {
            size_t off = items[i].offset;
            sgd_item(p->data + off, m + (off - base), p->grad + off, shadow ? shadow + off : NULL, items[i].len, gs,
                     lr, c->momentum, items[i].decay ? decay_mul : 1.0f);
        }
        return;
    }
    if (t < 1) t = 1;
    /* PyTorch's AdamW: step_size = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps */
    const double bc1 = 1.0 - pow((double)c->beta1, (double)t);
    const double bc2 = 1.0 - pow((double)c->beta2, (double)t);
    const float step_size = (float)((double)lr / bc1);
    const float inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    #pragma omp parallel for schedule(static)
    for (int64_t i = first; i < end; i++) {
        size_t off = items[i].offset;
        adamw_item(p->data + off, m + (off - base), v + (off - base), p->grad + off, shadow ? shadow + off : NULL,
                   items[i].len, gs, c->beta1, c->beta2, c->eps, step_size, inv_bc2_sqrt,
                   items[i].decay ? decay_mul : 1.0f);
    }
}

void st_optim_step(st_optim *o, st_params *p, float lr, int64_t t, float gscale) {
    step_items(o, p, lr, t, gscale, 0, o->n_items, p->m, p->v, 0, p->bf16);
    if (p->bf16) ++*p->bf16_ver;   /* the shadow changed: packed copies are stale */
}

void st_optim_step_items(st_optim *o, st_params *p, float lr, int64_t t, float gscale, int64_t first,
                         int64_t end, float *m, float *v, size_t base) {
    step_items(o, p, lr, t, gscale, first, end, m, v, base, NULL);
}

int st_params_finite(const st_params *p) {
    int64_t bad = 0;   /* an integer count: exact in any order */
    const float *d = p->data;
    const int64_t n = (int64_t)p->n;
    #pragma omp parallel for reduction(+:bad) schedule(static)
    for (int64_t i = 0; i < n; i++) bad += !isfinite(d[i]);
    return bad == 0;
}
