/* matmul_bf16.c - the bf16 backend: oneDNN's matmul primitive, bf16 x bf16 -> f32.
 *
 *   c_i (M,N) = alpha op(a_i) op(b_i) + beta c_i,  i < count (a batch: 3-d descriptors)
 * a and b are rounded to bf16 (round to nearest even, st_f32_to_bf16) unless the caller
 * passes a ready bf16 copy (parameter shadows); oneDNN multiplies with fp32 accumulation
 * and writes fp32. alpha is an output scale, beta a "sum" post-op, transposes are the
 * operands' strides: one primitive per (M, N, K, ldc, transposes, alpha, beta), created
 * on first use and kept in a small LRU cache (a training step uses ~30 shapes; creating
 * a primitive JIT-compiles its kernel and costs milliseconds).
 *
 * Packed weights: a b operand that is a weight's shadow (st_mm_arg.ver set: the linear
 * layers and the LM head, forward and backward) is declared to oneDNN with format "any",
 * so the primitive picks the layout its kernel reads (brgemm wants B in VNNI-blocked
 * tiles, e.g. BA16a64b2a; from a plain layout it re-blocks B inside every call). The
 * backend keeps one packed copy per (weight, layout), reordered from the shadow when
 * the shadow's version moved (once per optimizer update, st_params_refresh_bf16) and
 * reused by every call until then. A primitive whose chosen layout is the plain one
 * packs nothing.
 *
 * ISA: oneDNN picks its kernels at run time. With AVX512-BF16 (Cooper Lake, Sapphire
 * Rapids, Zen 4) or AMX it runs native bf16 dot products (brg:avx512_core_bf16 / _amx):
 * this row. Without them oneDNN either emulates bf16 with fp32 FMAs (plain AVX-512:
 * gemm:jit at ~30 GFLOPS against 100-200 for sgemm on the Xeon of sessions 1-5) or has no
 * bf16 matmul at all (2.6/2.7 on an AVX2 CPU); either way the products run as sgemm on
 * bf16-rounded operands instead (matmul_bf16_emu.c): the same results up to the order of
 * the fp32 additions and subnormals (the native kernels take subnormal inputs and results
 * as 0, sgemm keeps them: |x| < 1.2e-38, outside a model's range), at nearly sgemm's
 * speed, logged and warned as emulated.
 *
 * Threads: Debian's oneDNN uses OpenMP (libgomp), the same pool as our loops and
 * OpenBLAS; its matmul splits M/N blocks over threads and reduces K in a fixed order, so
 * results are deterministic for a fixed thread count (tests/test_bf16.c checks it). */
#include "core/matmul_internal.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef ST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#define MM_CACHE 128   /* cached primitives; least recently used is replaced when full */
#define PK_CACHE 256   /* packed weight copies (a few per weight matrix); LRU as well */

typedef struct mm_key {
    int64_t count, M, N, K, ldc, cstride;   /* cstride: c's batch stride (count > 1) */
    int ta, tb;
    float alpha, beta;
    int packed;             /* b is a weight: its layout is the primitive's choice */
} mm_key;

typedef struct mm_entry {
    mm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;  /* descriptors fixed, data handles set per call */
    uint64_t used;          /* LRU clock */
    char impl[64];          /* oneDNN implementation name */
    /* packed b (key.packed and a layout other than the plain one): the reorder from the
     * plain bf16 shadow (b_plain) into b's layout, and the packed size in bytes */
    dnnl_primitive_t reorder;
    dnnl_memory_t b_plain;
    dnnl_memory_desc_t b_md, b_src_md; /* the packed layout, and the shadow's as read */
    size_t b_bytes;
    dnnl_memory_t sp;       /* the primitive's scratchpad (user mode), handle set per call */
    size_t sp_bytes;
} mm_entry;

/* A weight packed into one layout (shared by the primitives that chose it, e.g. the LM
 * head's chunks of different row counts): from shadow src, read as src_md (the weight or
 * its transpose: a square weight's two orientations have the same packed layout but not
 * the same contents), at version ver. */
typedef struct pk_entry {
    const uint16_t *src;
    dnnl_memory_desc_t src_md, md;
    uint64_t ver, used;
    void *buf;
} pk_entry;

typedef struct bf16_state {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    mm_entry cache[MM_CACHE];
    int n;
    uint64_t clock;
    pk_entry packs[PK_CACHE];
    int n_packs;
    void *sp;               /* one scratchpad for every primitive (calls are sequential) */
    size_t sp_cap;
    void *scratch[3];       /* rounded a, b; the dense product of a batch with a strided c */
    size_t cap[3];          /* in bytes */
} bf16_state;

/* A failed oneDNN call on a shape that was already accepted is a broken invariant (or
 * memory exhaustion inside oneDNN): report the status and stop. */
static void dnnl_ok(dnnl_status_t s, const char *what, const char *file, int line) {
    if (s == dnnl_success) return;
    st_log(ST_LOG_ERROR, "oneDNN: %s failed with status %d", what, (int)s);
    st_assert_fail(what, file, line);
}
#define DNNL_OK(call) dnnl_ok((call), #call, __FILE__, __LINE__)

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

/* oneDNN's ISA values are bit sets, each including the ones below it: isa has all of
 * want's bits (avx512_core_amx includes avx512_core_bf16). */
static int isa_has(dnnl_cpu_isa_t isa, dnnl_cpu_isa_t want) {
    return ((unsigned)isa & (unsigned)want) == (unsigned)want;
}

/* Descriptor of a row-major (rows, cols) operand stored transposed or not with leading
 * dimension ld; a batch (count > 1) adds a leading dimension of stride bstride. */
static void operand_md(dnnl_memory_desc_t *md, int64_t count, int64_t rows, int64_t cols, int trans,
                       int64_t ld, int64_t bstride, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {count, rows, cols};
    dnnl_dims_t strides = {bstride, trans ? 1 : ld, trans ? ld : 1};
    int nd = count > 1 ? 3 : 2;
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, nd, nd == 3 ? dims : dims + 1, dt, nd == 3 ? strides : strides + 1));
}

/* Create the primitive of key k; returns the oneDNN status (unimplemented: no kernel). */
static dnnl_status_t entry_create(bf16_state *s, mm_entry *en, const mm_key *k) {
    dnnl_memory_desc_t amd, bmd, cmd;
    operand_md(&amd, k->count, k->M, k->K, k->ta, k->ta ? k->M : k->K, k->M * k->K, dnnl_bf16);
    operand_md(&bmd, k->count, k->K, k->N, k->tb, k->tb ? k->K : k->N, k->K * k->N, dnnl_bf16);
    operand_md(&cmd, k->count, k->M, k->N, 0, k->ldc, k->cstride, dnnl_f32);
    dnnl_memory_desc_t bany;
    if (k->packed) {   /* a weight: let the primitive choose its layout */
        ST_ASSERT(k->count == 1);
        const dnnl_dims_t bdims = {k->K, k->N};
        DNNL_OK(dnnl_memory_desc_init_by_tag(&bany, 2, bdims, dnnl_bf16, dnnl_format_tag_any));
    }
    dnnl_matmul_desc_t desc;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &amd, k->packed ? &bany : &bmd, NULL, &cmd));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    /* one scratchpad of ours for every primitive (the calls are sequential), grown to the
     * largest need and kept, instead of oneDNN's own allocations */
    DNNL_OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha));
    if (k->beta != 0.0f) {
        DNNL_OK(dnnl_post_ops_create(&po));
        DNNL_OK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, s->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return st;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) impl = "?";
    snprintf(en->impl, sizeof en->impl, "%s", impl);
    dnnl_memory_desc_t wmd = bmd;
    if (k->packed) wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t smd = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    st = dnnl_primitive_create(&en->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return st;
    if (k->packed && !dnnl_memory_desc_equal(&wmd, &bmd)) {   /* packed: a reorder from the shadow */
        dnnl_primitive_desc_t rpd = NULL;
        DNNL_OK(dnnl_reorder_primitive_desc_create(&rpd, &bmd, s->eng, &wmd, s->eng, NULL));
        DNNL_OK(dnnl_primitive_create(&en->reorder, rpd));
        dnnl_primitive_desc_destroy(rpd);
        DNNL_OK(dnnl_memory_create(&en->b_plain, &bmd, s->eng, DNNL_MEMORY_NONE));
        en->b_md = wmd;
        en->b_src_md = bmd;
        en->b_bytes = dnnl_memory_desc_get_size(&wmd);
        snprintf(en->impl + strlen(en->impl), sizeof en->impl - strlen(en->impl), " (packed B)");
    }
    en->sp_bytes = dnnl_memory_desc_get_size(&smd);
    if (en->sp_bytes) DNNL_OK(dnnl_memory_create(&en->sp, &smd, s->eng, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&en->a, &amd, s->eng, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&en->b, &wmd, s->eng, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&en->c, &cmd, s->eng, DNNL_MEMORY_NONE));
    en->key = *k;
    st_log(ST_LOG_DEBUG, "bf16 matmul %lld x %lldx%lldx%lld (ta %d tb %d alpha %g beta %g): %s", (long long)k->count,
           (long long)k->M, (long long)k->N, (long long)k->K, k->ta, k->tb, k->alpha, k->beta, en->impl);
    return dnnl_success;
}

static void entry_destroy(mm_entry *en) {
    if (en->prim) dnnl_primitive_destroy(en->prim);
    if (en->a) dnnl_memory_destroy(en->a);
    if (en->b) dnnl_memory_destroy(en->b);
    if (en->c) dnnl_memory_destroy(en->c);
    if (en->reorder) dnnl_primitive_destroy(en->reorder);
    if (en->b_plain) dnnl_memory_destroy(en->b_plain);
    if (en->sp) dnnl_memory_destroy(en->sp);
    memset(en, 0, sizeof *en);
}

/* The copy of weight shadow src in primitive en's layout at version ver: reused while the
 * version holds, else (re)ordered from the shadow into it. */
static void *packed_weight(bf16_state *s, mm_entry *en, const uint16_t *src, uint64_t ver) {
    pk_entry *pk = NULL, *lru = NULL;
    for (int i = 0; i < s->n_packs && !pk; i++) {
        pk_entry *p = &s->packs[i];
        if (p->src == src && dnnl_memory_desc_equal(&p->md, &en->b_md) &&
            dnnl_memory_desc_equal(&p->src_md, &en->b_src_md))
            pk = p;
        else if (!lru || p->used < lru->used) lru = p;
    }
    if (!pk) {
        pk = s->n_packs < PK_CACHE ? &s->packs[s->n_packs++] : lru;
        free(pk->buf);
        memset(pk, 0, sizeof *pk);
        pk->buf = aligned_alloc(64, (en->b_bytes + 63) & ~(size_t)63);
        if (!pk->buf) st_oom_exit("a packed bf16 weight", (size_t)en->b_bytes);
        pk->src = src;
        pk->md = en->b_md;
        pk->src_md = en->b_src_md;
        pk->ver = ver + 1;   /* not yet packed */
    }
    pk->used = ++s->clock;
    if (pk->ver != ver) {
        DNNL_OK(dnnl_memory_set_data_handle(en->b_plain, (void *)src));
        DNNL_OK(dnnl_memory_set_data_handle(en->b, pk->buf));
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, en->b_plain}, {DNNL_ARG_TO, en->b}};
        DNNL_OK(dnnl_primitive_execute(en->reorder, s->stream, 2, args));
        DNNL_OK(dnnl_stream_wait(s->stream));
        pk->ver = ver;
    }
    return pk->buf;
}

static mm_entry *entry_get(bf16_state *s, const mm_key *k) {
    mm_entry *lru = NULL;
    for (int i = 0; i < s->n; i++) {
        mm_entry *en = &s->cache[i];
        if (memcmp(&en->key, k, sizeof *k) == 0) { en->used = ++s->clock; return en; }
        if (!lru || en->used < lru->used) lru = en;
    }
    mm_entry *en = s->n < MM_CACHE ? &s->cache[s->n++] : lru;
    entry_destroy(en);
    dnnl_status_t st = entry_create(s, en, k);
    if (st != dnnl_success) {
        st_log(ST_LOG_ERROR, "oneDNN: no bf16 matmul for %lldx%lldx%lld (status %d)", (long long)k->M,
               (long long)k->N, (long long)k->K, (int)st);
        st_assert_fail("bf16 matmul primitive", __FILE__, __LINE__);
    }
    en->used = ++s->clock;
    return en;
}

/* The bf16 values of operand x, `count` matrices stored as (rows, cols) with leading
 * dimension x.ld, matrix i at x.f + i * stride: its own copy when it has one (dense),
 * else rounded into scratch slot `slot` as dense matrices (batch stride rows x cols). */
static const uint16_t *operand_bf16(bf16_state *s, int slot, st_mm_arg x, int64_t rows, int64_t cols,
                                    int64_t count, int64_t stride) {
    const int dense = x.ld == cols && (count == 1 || stride == rows * cols);
    if (x.h) {
        ST_ASSERT(dense);
        return x.h;
    }
    size_t need = (size_t)(count * rows * cols);
    uint16_t *d = st_mm_grow(&s->scratch[slot], &s->cap[slot], need * sizeof(uint16_t));
    if (dense)
        st_bf16_round(d, x.f, count * rows * cols);
    else
        st_bf16_round_strided(d, x.f, count, rows, cols, x.ld, stride);
    return d;
}

/* c_i (M,N) (leading dimension ldc, batch stride bt->c) = tmp_i + beta c_i, tmp dense. */
static void merge_staged(const float *tmp, const st_mm_batch *bt, int64_t M, int64_t N, float beta, float *c,
                         int64_t ldc) {
    #pragma omp parallel for schedule(static) if (bt->count * M * N > 32768)
    for (int64_t q = 0; q < bt->count * M; q++) {
        const float *t = tmp + q * N;
        float *d = c + (q / M) * bt->c + (q % M) * ldc;
        if (beta == 0.0f)
            memcpy(d, t, (size_t)N * sizeof(float));
        else
            for (int64_t j = 0; j < N; j++) d[j] = t[j] + beta * d[j];
    }
}

/* One oneDNN product (or batch of them), as asked. */
static void bf16_product(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                         st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    bf16_state *s = mm->state;
    const uint16_t *ah = operand_bf16(s, 0, a, a.trans ? K : M, a.trans ? M : K, bt->count, bt->a);
    const uint16_t *bh = operand_bf16(s, 1, b, b.trans ? N : K, b.trans ? K : N, bt->count, bt->b);
    /* A batch whose c is strided (attention's score blocks inside (T,T) rows, output rows
     * inside (T,D) heads) gets oneDNN 2.6's gemm:jit fallback, not brgemm: 18-45 GFLOPS
     * with an output scale, 160-840 without, against 340-1,700 for the same products with
     * every operand dense (AMX Xeon, 2026-11-26, 32 pairs of 64 x 64..512 x 64). a and b
     * are dense here already (rounded copies), so the product goes into a dense c and is
     * merged: c = tmp + beta c, the sum post-op's own arithmetic. */
    const int staged = bt->count > 1 && (ldc != N || bt->c != M * N);
    float *cd = c;
    if (staged) cd = st_mm_grow(&s->scratch[2], &s->cap[2], (size_t)(bt->count * M * N) * sizeof(float));
    mm_key k;
    memset(&k, 0, sizeof k);   /* padding too: keys are compared with memcmp */
    k.count = bt->count; k.cstride = bt->count > 1 ? (staged ? M * N : bt->c) : 0;
    k.M = M; k.N = N; k.K = K; k.ldc = staged ? N : ldc; k.ta = a.trans; k.tb = b.trans; k.alpha = alpha;
    k.beta = staged ? 0.0f : beta;
    k.packed = b.h && b.ver && bt->count == 1;
    mm_entry *en = entry_get(s, &k);
    DNNL_OK(dnnl_memory_set_data_handle(en->a, (void *)ah));
    DNNL_OK(dnnl_memory_set_data_handle(en->b, en->reorder ? packed_weight(s, en, bh, *b.ver) : (void *)bh));
    DNNL_OK(dnnl_memory_set_data_handle(en->c, cd));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, en->a}, {DNNL_ARG_WEIGHTS, en->b}, {DNNL_ARG_DST, en->c},
                               {DNNL_ARG_SCRATCHPAD, en->sp}};
    if (en->sp) DNNL_OK(dnnl_memory_set_data_handle(en->sp, st_mm_grow(&s->sp, &s->sp_cap, en->sp_bytes)));
    DNNL_OK(dnnl_primitive_execute(en->prim, s->stream, en->sp ? 4 : 3, args));
    DNNL_OK(dnnl_stream_wait(s->stream));
    if (staged) merge_staged(cd, bt, M, N, beta, c, ldc);
    snprintf(mm->last_impl, sizeof mm->last_impl, "%s", en->impl);
}

/* c (M,N) (leading dimension ldc) = t^T + beta c, t (N,M) dense. */
static void merge_transposed(const float *t, int64_t M, int64_t N, float beta, float *c, int64_t ldc) {
    #pragma omp parallel for schedule(static) if (M * N > 32768)
    for (int64_t i = 0; i < M; i++) {
        float *d = c + i * ldc;
        if (beta == 0.0f)
            for (int64_t j = 0; j < N; j++) d[j] = t[j * M + i];
        else
            for (int64_t j = 0; j < N; j++) d[j] = t[j * M + i] + beta * d[j];
    }
}

/* A single product whose reduction is much longer than both output sides (K >=
 * MM_LONG_K max(M, N)): the LM head's dx = dz W, (rows, C) over the whole vocabulary.
 * With AMX, oneDNN 2.6 ran it at 0.65-0.74x the speed of its transpose c^T = op(b)^T
 * op(a)^T, the same products with the roles of the operands swapped (AMX Xeon,
 * 2026-11-26: 688 x 512 x 33280 and 1024 and 2048 rows, medians of 15 alternating pairs).
 * In training it also reads the weight's shadow as it is, where the direct product
 * re-packs W into its own layout after every update: at C = 256 with 704-row chunks,
 * where a standalone probe favoured the direct product, training's dx took 50-75 ms a
 * step transposed against 79-88 ms direct (alternating `bench --preset S --profile`). So
 * there (mm->long_k) such a product is computed transposed into a dense scratch and
 * written back with beta; the write-back is M N against the product's 2 M N K. With
 * AVX512-BF16 alone the direct product won: on the AMD Zen 4 (2026-11-27, 3 alternating
 * pairs of `bench --profile`, bf16) the LM head's time over the linear layers' was
 * 0.869-0.885 direct against 0.901-0.904 transposed on M, 2.56-2.64 against 2.69-2.72 on
 * S. */
#define MM_LONG_K 16

static void bf16_gemm(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                      st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    bf16_state *s = mm->state;
    ST_ASSERT(!omp_in_parallel());   /* one cache and scratch: not from inside a parallel loop */
    ST_ASSERT(K > 0);   /* K = 0 is st_mm_gemm_batched's */
    if (mm->long_k && bt->count == 1 && K >= MM_LONG_K * (M > N ? M : N)) {
        /* t (N,M) = op(b)^T op(a)^T: each operand read with the other transpose */
        float *t = st_mm_grow(&s->scratch[2], &s->cap[2], (size_t)(M * N) * sizeof(float));
        st_mm_arg ta = b, tb = a;
        ta.trans = !b.trans;
        ta.ver = NULL;   /* only a b operand is kept packed */
        tb.trans = !a.trans;
        bf16_product(mm, bt, N, M, K, alpha, ta, tb, 0.0f, t, M);
        merge_transposed(t, M, N, beta, c, ldc);
        return;
    }
    bf16_product(mm, bt, M, N, K, alpha, a, b, beta, c, ldc);
}

static void bf16_close(st_mm *mm) {
    bf16_state *s = mm->state;
    if (!s) return;
    for (int i = 0; i < s->n; i++) entry_destroy(&s->cache[i]);
    for (int i = 0; i < s->n_packs; i++) free(s->packs[i].buf);
    free(s->sp);
    if (s->stream) dnnl_stream_destroy(s->stream);
    if (s->eng) dnnl_engine_destroy(s->eng);
    for (int i = 0; i < 3; i++) free(s->scratch[i]);
    free(s);
    mm->state = NULL;
}

static int bf16_open(st_mm *mm, st_error *e) {
    const dnnl_version_t *v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (!isa_has(isa, dnnl_cpu_isa_avx512_core_bf16)) {   /* oneDNN would emulate (slower than sgemm) or has no kernel */
        /* the ISA oneDNN runs may be capped below the CPU's (probe 27: ONEDNN_MAX_CPU_ISA) */
        const char *cap = getenv("ONEDNN_MAX_CPU_ISA") ? getenv("ONEDNN_MAX_CPU_ISA") : getenv("DNNL_MAX_CPU_ISA");
        char why[160];
        snprintf(why, sizeof why, "oneDNN %d.%d.%d, ISA %s%s%s: no avx512_core_bf16 or AMX", v->major, v->minor,
                 v->patch, isa_name(isa), cap ? ", capped by ONEDNN_MAX_CPU_ISA=" : "", cap ? cap : "");
        return st_mm_bf16_emu_open(mm, why, e);
    }
    mm->native = 1;
    const int amx = isa_has(isa, dnnl_cpu_isa_avx512_core_amx);
    mm->attn = amx ? ST_MM_ATTN_GRAD | ST_MM_ATTN_STREAM : 0;
    mm->long_k = amx;
    bf16_state *s = st_calloc(1, sizeof *s, e);
    if (!s) return ST_ERR_MEMORY;
    mm->state = s;
    if (dnnl_engine_create(&s->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&s->stream, s->eng, dnnl_stream_default_flags) != dnnl_success) {
        bf16_close(mm);
        return st_fail(e, ST_ERR_GENERIC, "precision bf16: cannot create a oneDNN CPU engine and stream");
    }
    /* one small product of each kind the ops use: refuse up front, not mid-training */
    for (int t = 0; t < 4; t++) {
        mm_key k;
        memset(&k, 0, sizeof k);   /* padding too: keys are compared with memcmp */
        k.count = 1;
        k.M = 16; k.N = 16; k.K = 16; k.ldc = 16; k.ta = t & 1; k.tb = t >> 1; k.alpha = 1.0f; k.beta = (float)(t & 1);
        mm_entry *en = &s->cache[s->n];
        dnnl_status_t st = entry_create(s, en, &k);
        if (st != dnnl_success) {
            entry_destroy(en);
            bf16_close(mm);
            return st_fail(e, ST_ERR_CONFIG, "precision bf16: oneDNN %d.%d.%d has no bf16 matmul for this CPU "
                           "(ISA %s, status %d); use precision fp32", v->major, v->minor, v->patch,
                           isa_name(isa), (int)st);
        }
        en->used = ++s->clock;
        s->n++;
    }
    snprintf(mm->describe, sizeof mm->describe, "bf16 (oneDNN %d.%d.%d, ISA %s, native bf16, kernel %s; "
             "attention %s)", v->major, v->minor, v->patch, isa_name(isa), s->cache[0].impl,
             mm->attn & ST_MM_ATTN_GRAD ? "bf16" : "fp32");
    if (!mm->quiet) st_log(ST_LOG_INFO, "matmul precision: %s", mm->describe);
    return ST_OK;
}

#else  /* built without oneDNN */

static int bf16_open(st_mm *mm, st_error *e) {
    (void)mm;
    return st_fail(e, ST_ERR_CONFIG, "precision bf16: this stretch was built without oneDNN; install it "
                   "(scripts/install_deps.sh: libdnnl-dev) and rebuild (cmake reports 'oneDNN: found')");
}
static void bf16_close(st_mm *mm) { (void)mm; }
static void bf16_gemm(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                      st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    st_assert_fail("bf16 backend without oneDNN", __FILE__, __LINE__);
}

#endif

const st_mm_backend st_mm_backend_bf16 = {.name = "bf16", .parallel_safe = 0, .bf16_operands = 1, .row_align = 64,
                                      .open = bf16_open, .close = bf16_close, .gemm = bf16_gemm};
