/* autograd.c - the tape: nodes appended in execution order, walked in reverse.
 * Each node's backward reads out->grad and accumulates (+=) into its inputs' grads. */
#include "st_profile.h"
#include "st_tensor.h"

#include <stdlib.h>
#include <string.h>

int st_ctx_init(st_ctx *ctx, st_arena *arena, int cap_nodes, st_error *e) {
    memset(ctx, 0, sizeof *ctx);
    ctx->arena = arena;
    ctx->cap_nodes = cap_nodes > 0 ? cap_nodes : 4096;
    ctx->nodes = st_calloc((size_t)ctx->cap_nodes, sizeof(st_node), e);
    if (!ctx->nodes) return ST_ERR_MEMORY;
    ctx->grad = 1;
    return ST_OK;
}

void st_ctx_free(st_ctx *ctx) {
    free(ctx->nodes);
    ctx->nodes = NULL;
}

void st_ctx_begin(st_ctx *ctx, int grad, int train) {
    st_arena_reset(ctx->arena);
    ctx->n_nodes = 0;
    ctx->grad = grad;
    ctx->train = train;
    ctx->failed = 0;
    ctx->backward_bytes = 0;
}

int st_ctx_check(st_ctx *ctx, st_error *e) {
    if (!ctx->failed) return ST_OK;
    if (ctx->arena->overflowed) {
        char buf[256];
        st_arena_overflow_msg(ctx->arena, buf, sizeof buf);
        return st_fail(e, ST_ERR_MEMORY, "%s", buf);
    }
    if (ctx->n_nodes >= ctx->cap_nodes)
        return st_fail(e, ST_ERR_MEMORY, "autograd tape full (%d nodes)", ctx->cap_nodes);
    return st_fail(e, ST_ERR_MEMORY, "step failed: out of memory");
}

int st_needs_grad(const st_ctx *ctx, st_tensor *a, st_tensor *b, st_tensor *c, st_tensor *d) {
    if (!ctx->grad) return 0;
    return (a && a->requires_grad) || (b && b->requires_grad) ||
           (c && c->requires_grad) || (d && d->requires_grad);
}

st_node *st_record(st_ctx *ctx, const char *op, st_backward_fn fn, st_tensor *out,
                   st_tensor *a, st_tensor *b, st_tensor *c, st_tensor *d, void *saved) {
    if (ctx->n_nodes >= ctx->cap_nodes) { ctx->failed = 1; return NULL; }
    st_node *n = &ctx->nodes[ctx->n_nodes++];
    n->op = op;
    n->backward = fn;
    n->out = out;
    n->in[0] = a; n->in[1] = b; n->in[2] = c; n->in[3] = d;
    n->saved = saved;
    out->requires_grad = 1;
    if (ctx->prof) st_profile_fwd(ctx->prof, op);
    return n;
}

int st_backward(st_ctx *ctx, st_tensor *loss, float seed, st_error *e) {
    int rc = st_ctx_check(ctx, e);
    if (rc) return rc;
    if (!loss) return st_fail(e, ST_ERR_GENERIC, "backward: no loss tensor");
    ST_ASSERT(st_numel(loss) == 1);
    float *g = st_grad(ctx, loss);
    if (!g) return st_ctx_check(ctx, e);
    g[0] += seed;
    if (ctx->prof) ctx->prof->in_backward = 1;   /* gemm calls from here on are backward's */
    for (int i = ctx->n_nodes - 1; i >= 0; i--) {
        st_node *n = &ctx->nodes[i];
        if (!n->out->grad && !(n->out->base && n->out->base->grad)) continue; /* no gradient reached it */
        if (!n->out->grad) { if (!st_grad(ctx, n->out)) break; }
        const double t0 = ctx->prof ? st_time() : 0.0;
        if (ctx->prof) ctx->prof->bwd_op = n->op;
        n->backward(ctx, n);
        if (ctx->prof) st_profile_bwd(ctx->prof, n->op, st_time() - t0);
        if (ctx->failed) break;
    }
    if (ctx->prof) { ctx->prof->in_backward = 0; ctx->prof->bwd_op = NULL; }
    return st_ctx_check(ctx, e);
}
