/* cmd_selfcheck.c - `stretch selfcheck`: report the BLAS core and threads, then build a
 * tiny model for every position method and verify, on this machine, that a training
 * forward/backward and the streamed inference forward agree and are finite; then report
 * precision bf16 (oneDNN's ISA, native or emulated) and check its loss against fp32. */
#include "cli/cli.h"
#include "st_matmul.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The tiny alibi model's loss with bf16 matmuls against fp32: within 1% (bf16 keeps 8
 * significant bits; a loss of ~log 50 moves by far less). Returns 1 on failure. */
static int check_bf16(st_ctx *ctx, const int32_t *ids, const int32_t *tg, int64_t B, int64_t T) {
    if (!st_precision_available(ST_PREC_BF16)) {
        printf("  bf16        not available: built without oneDNN (libdnnl-dev)\n");
        return 0;
    }
    st_error e = {0};
    st_mm *mm = NULL;
    st_model m;
    st_model_config c;
    st_model_config_default(&c);
    c.vocab_size = 50; c.n_layers = 2; c.d_model = 32; c.n_heads = 4; c.pos = ST_POS_ALIBI;
    if (st_mm_create(&mm, ST_PREC_BF16, 1, &e) || st_model_init(&m, &c, 1, &e)) {
        printf("  bf16        FAILED: %s\n", e.msg);
        st_mm_free(mm);
        return 1;
    }
    float l[2] = {NAN, NAN};
    for (int k = 0; k < 2; k++) {
        if (k && st_params_enable_bf16(&m.params, &e)) break;
        st_ctx_begin(ctx, 0, 0);
        ctx->mm = k ? mm : NULL;
        st_tensor *loss = st_model_loss(&m, ctx, ids, tg, B, T, 0, NULL, &e);
        if (loss) l[k] = loss->data[0];
    }
    ctx->mm = NULL;
    int ok = isfinite(l[1]) && fabsf(l[1] - l[0]) <= 0.01f * fabsf(l[0]);
    printf("  bf16        loss %.5f (fp32 %.5f)  %s; %s\n", l[1], l[0], ok ? "ok" : "FAILED", st_mm_describe(mm));
    st_model_free(&m);
    st_mm_free(mm);
    return !ok;
}

int cmd_selfcheck(int argc, char **argv) {
    (void)argv;
    if (argc > 1) return cli_usage("selfcheck", "takes no arguments");
    st_blas_log();
    st_error e = {0};
    st_arena ar;
    st_ctx ctx;
    if (st_arena_init(&ar, 1 << 22, (size_t)1 << 32, &e) || st_ctx_init(&ctx, &ar, 8192, &e)) return cli_report("selfcheck", &e);
    int failures = 0;
    const int64_t B = 2, T = 32;
    int32_t ids[64], tg[64];
    st_rng r;
    st_rng_seed(&r, 1);
    for (int i = 0; i < 64; i++) { ids[i] = (int32_t)st_rng_below(&r, 50); tg[i] = (int32_t)st_rng_below(&r, 50); }
    for (int pos = 0; pos < ST_POS_COUNT; pos++) {
        st_model_config c;
        st_model_config_default(&c);
        c.vocab_size = 50; c.n_layers = 2; c.d_model = 32; c.n_heads = 4; c.pos = pos; c.max_len = 64;
        st_pos_exercise(&c);   /* every parameter the method can have is learned */
        st_model m;
        if (st_model_init(&m, &c, 1, &e)) { st_ctx_free(&ctx); st_arena_free(&ar); return cli_report("selfcheck", &e); }
        st_ctx_begin(&ctx, 1, 0);
        st_tensor *loss = st_model_loss(&m, &ctx, ids, tg, B, T, 0, NULL, &e);
        int ok = loss && st_backward(&ctx, loss, 1.0f, &e) == ST_OK;
        float l_train = ok ? loss->data[0] : NAN;
        double gn = 0;
        for (size_t i = 0; ok && i < m.params.n; i++) gn += (double)m.params.grad[i] * m.params.grad[i];
        st_ctx_begin(&ctx, 0, 0);
        loss = st_model_loss(&m, &ctx, ids, tg, B, T, 0, NULL, &e);
        float l_inf = loss ? loss->data[0] : NAN;
        ok = ok && isfinite(l_train) && isfinite(gn) && gn > 0 && fabsf(l_train - l_inf) < 1e-4f * fabsf(l_train);
        printf("  %-11s loss %.5f (train path) %.5f (inference path) |grad| %.4g  %s\n",
               st_pos_name(pos), l_train, l_inf, sqrt(gn), ok ? "ok" : "FAILED");
        failures += !ok;
        st_model_free(&m);
    }
    failures += check_bf16(&ctx, ids, tg, B, T);
    /* which transports this binary has: a user about to mpirun wants to know before */
    printf("  mpi         %s\n", st_dist_have_mpi() ? "built in: `mpirun -n N stretch train ...` trains data-parallel "
                                                    "(docs/distributed.md)"
                                                  : "not built (libopenmpi-dev missing at configure time): one "
                                                    "process only");
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    printf("selfcheck: %s\n", failures ? "FAILED" : "ok");
    return failures ? ST_ERR_GENERIC : ST_OK;
}
