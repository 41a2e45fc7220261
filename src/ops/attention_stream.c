/* attention_stream.c - the inference attention forward: flash-attention-style online
 * softmax over key blocks, so no (T,T) buffer exists and memory per thread is one score
 * block (QBLOCK, kblock) plus one accumulator (QBLOCK, D). Also the per-head bias tables
 * and the double-precision materialised reference used by the tests.
 * Not here: the grad-mode kernels and backward (attention.c).
 *
 * The same kernel serves new queries against a KV cache (attention_cached.c): there
 * query row i sits at key position p = i + koff and the bias is bias(h, p - j) (general
 * form: bias(h, kpos + p, kpos + j) at absolute positions).
 *
 * Clipped relative positions (ReRoPE, an inference-time transform): keys at distance
 * p - j >= clip score scale q2_i.k2_j instead of scale q_i.k_j (q2 = q rotated at position
 * clip, k2 = the unrotated keys, so q2.k2 sees relative position clip); that tile is one
 * more sgemm per key block that holds such keys, into the general bias's scratch.
 *
 * Online softmax (Milakov & Gimelshein 2018; Dao et al. 2022), per query row i, over key
 * blocks J in order, with s_j = scale q_i.k_j + bias(h, i - j):
 *   m' = max(m, max_{j in J} s_j)          running max, starts at -inf
 *   a  = exp(m - m')                       rescale of what was accumulated so far
 *   l' = a l + sum_{j in J} exp(s_j - m')   running normaliser
 *   acc' = a acc + sum_{j in J} exp(s_j - m') v_j
 * and finally out_i = acc / l. Every exponent is <= 0, so a bias of any size (ALiBi at
 * distance 65536 is -32768 for slope 0.5) only underflows to 0, never overflows. A row
 * whose keys are all at -inf so far has m' = -inf and is skipped (no exp(-inf + inf)).
 * Dropout (only when st_attention runs a training forward without grad) multiplies the
 * terms of acc by keep/(1-p) but not those of l: out_i = sum_j p_ij mask_ij v_j /(1-p).
 * With CoPE (attention_cope.c) the key blocks are visited from the newest to the oldest
 * (the online softmax does not depend on the order) and each row carries the running sum
 * of its gates from one block to the next: still one float per row, no (T,T) buffer. */
#include "attention_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

void st_attn_bias_tables(const st_attn_bias *bias, int64_t H, int64_t T, int causal, float *rtab) {
    int64_t n = st_attn_bias_len(T, causal), d0 = st_attn_bias_d0(T, causal);
    for (int64_t h = 0; h < H; h++) {
        float *t = rtab + h * n;
        bias->fill(bias, (int)h, d0, n, t);
        /* fill gives t[k] = bias(d0 + k); reverse so t[m] = bias((T-1) - m) (d0 + n-1 = T-1) */
        for (int64_t a = 0, b = n - 1; a < b; a++, b--) { float x = t[a]; t[a] = t[b]; t[b] = x; }
    }
}

/* A float count rounded up to 16, so every part of the scratch stays 64-byte aligned. */
static size_t aligned16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Query rows per block (QBLOCK below): ST_ATTN_SQBLOCK for the per-task schedule (its
 * sgemm tiles stay in L2); for the block-major one, whose every product is one oneDNN call
 * over the (b,h) pairs, ~2,048 rows a call, up to ST_ATTN_SQBLOCK_BATCHED a pair: at 64
 * rows an eval of the S model at L = 16,384 (B H = 8, D = 32) made ~16,000 calls of 8
 * products of 64 x 256 x 32 per layer and product, `perf` put 43% of the run in oneDNN's
 * JIT code and 8% in the kernel (thread wake-ups), and it ran 1,808-1,837 tokens/s
 * against 2,083-2,085 with 256 rows (AMX Xeon, 2026-11-26). */
static int64_t stream_qrows(const st_attn_problem *pb) {
    if (!st_attn_batched(pb->mm, ST_MM_ATTN_STREAM)) return ST_ATTN_SQBLOCK;
    int64_t q = ST_ATTN_SQBLOCK;
    while (q < ST_ATTN_SQBLOCK_BATCHED && pb->B * pb->H * q < 2048) q *= 2;
    return q;
}

/* The row work's part of a slot: scores (QBLOCK, kblock) + accumulator (QBLOCK, D) +
 * running max and sum (QBLOCK each); a general bias or clipped scores add a (QBLOCK,
 * kblock) tile, CoPE its z rows (QBLOCK, n_pos) and running gate sums (QBLOCK). */
static size_t stream_row_floats(const st_attn_problem *pb, int64_t kblock) {
    const size_t q = (size_t)stream_qrows(pb), npos = pb->cope ? (size_t)pb->cope->n_pos : 0;
    const size_t s = q * (size_t)kblock;
    return aligned16(s) + aligned16(q * (size_t)pb->D) + 2 * q + (pb->gbias || pb->q2 ? aligned16(s) : 0) +
           (npos ? aligned16(q * npos) + q : 0) + (pb->stats ? aligned16(q * ST_ATTN_NSTATS) : 0);
}

static size_t stream_ops_floats(const st_attn_problem *pb, int64_t kblock);

size_t st_attn_stream_scratch_floats(const st_attn_problem *pb, int64_t kblock) {
    /* bf16 keys: after the row work, the widened key and value tiles (kblock, D) of a
     * block, and the clipped keys' */
    const size_t widen = pb->kh ? (size_t)(pb->k2h ? 3 : 2) * aligned16((size_t)kblock * (size_t)pb->D) : 0;
    if (st_attn_batched(pb->mm, ST_MM_ATTN_STREAM)) {   /* a slot per pair + its share of the bf16 operands */
        const size_t BH = (size_t)(pb->B * pb->H);
        return stream_row_floats(pb, kblock) + (stream_ops_floats(pb, kblock) + BH - 1) / BH;
    }
    return stream_row_floats(pb, kblock) + widen;
}

/* The scratch of one (b,h) pair's query block: scores (rb, nb), accumulator (rb, D),
 * running max and sum (rb), the general-bias or clipped-score tile (rb, nb), CoPE's z rows
 * (rb, n_pos) and running gate sums (rb); laid out as st_attn_stream_scratch_floats. */
typedef struct stream_buf { float *Sc, *acc, *m, *l, *G, *Z, *csum, *st, *Kw, *Vw, *K2w; } stream_buf;

static stream_buf stream_buf_of(const st_attn_problem *pb, int64_t kblock, float *scratch) {
    stream_buf sb;
    const int64_t npos = pb->cope ? pb->cope->n_pos : 0;
    sb.Sc = scratch;
    const size_t q = (size_t)stream_qrows(pb), s = aligned16(q * (size_t)kblock);
    sb.acc = sb.Sc + s;
    sb.m = sb.acc + aligned16(q * (size_t)pb->D);
    sb.l = sb.m + q;
    sb.G = sb.l + q;
    sb.Z = sb.G + (pb->gbias || pb->q2 ? s : 0);
    sb.csum = sb.Z + aligned16(q * (size_t)npos);
    sb.st = pb->stats ? sb.csum + (npos ? q : 0) : NULL;   /* (QBLOCK, ST_ATTN_NSTATS) running sums */
    /* bf16 keys: the widened tiles after the row work's part */
    const size_t tile = aligned16((size_t)kblock * (size_t)pb->D);
    sb.Kw = pb->kh ? scratch + stream_row_floats(pb, kblock) : NULL;
    sb.Vw = sb.Kw ? sb.Kw + tile : NULL;
    sb.K2w = sb.Kw && pb->k2h ? sb.Vw + tile : NULL;
    return sb;
}

/* The key/value pair a (b,h) pair reads: grouped-query heads share one, (b, h / g) of
 * H / g per b. */
static int64_t stream_kvp(const st_attn_problem *pb, int64_t bh) {
    const int64_t g = pb->kv_group > 1 ? pb->kv_group : 1;
    return (bh / pb->H) * (pb->H / g) + (bh % pb->H) / g;
}

/* The key blocks of query rows [i0, i1): row i sits at key position p = i + koff and sees
 * keys j in [lo(p), hi(p)): hi = p + 1 when causal (else Tk), lo = p - window + 1 with a
 * window (else 0), raised to the start of the previous block with a blockwise mask
 * (st_attn_block_lo) and to the row's instance start with a per-instance mask. The
 * blocks: first the nks blocks of sinks [0, send) below the window, then the blocks of
 * [kbeg, kend) in order (from the newest to the oldest with CoPE). */
typedef struct stream_keys { int64_t kbeg, kend, send, nks, nkw; } stream_keys;

static stream_keys stream_keys_of(const st_attn_problem *pb, int64_t i0, int64_t i1, int64_t kblock) {
    stream_keys k;
    const int64_t W = pb->window, koff = pb->koff;
    k.kend = pb->causal ? (i1 + koff < pb->Tk ? i1 + koff : pb->Tk) : pb->Tk;
    k.kbeg = W > 0 && i0 + koff - W + 1 > 0 ? i0 + koff - W + 1 : 0;
    const int64_t blo = st_attn_block_lo(pb, i0 + koff);   /* <= i0 + koff < kend */
    if (blo > k.kbeg) k.kbeg = blo;
    const int64_t S = W > 0 ? pb->sinks : 0;
    k.send = S < k.kbeg ? S : k.kbeg;
    k.nks = (k.send + kblock - 1) / kblock;
    k.nkw = k.kend > k.kbeg ? (k.kend - k.kbeg + kblock - 1) / kblock : 0;
    return k;
}

/* Key block kb (< nks + nkw) of that range: [*j0, *j1). */
static void stream_block_keys(const st_attn_problem *pb, const stream_keys *k, int64_t kb, int64_t kblock,
                              int64_t *j0, int64_t *j1) {
    const int64_t w = kb - k->nks;   /* window block, < 0 for a sink block */
    *j0 = w < 0 ? kb * kblock : k->kbeg + (pb->cope ? k->nkw - 1 - w : w) * kblock;
    const int64_t jend = w < 0 ? k->send : k->kend;
    *j1 = *j0 + kblock < jend ? *j0 + kblock : jend;
}

/* Before the first key block of pair bh, rows [i0, i1). */
static void stream_begin(const st_attn_problem *pb, int64_t bh, int64_t i0, int64_t i1, const stream_buf *sb) {
    const int64_t rb = i1 - i0;
    ST_ASSERT(!pb->cope || ((pb->window == 0 || pb->sinks == 0) && !pb->q2));   /* one contiguous span */
    for (int64_t r = 0; r < rb; r++) { sb->m[r] = -INFINITY; sb->l[r] = 0.0f; }
    memset(sb->acc, 0, (size_t)(rb * pb->D) * sizeof(float));
    if (sb->st) memset(sb->st, 0, (size_t)(rb * ST_ATTN_NSTATS) * sizeof(float));
    if (pb->cope) {   /* CoPE: z rows of the block, no gate counted yet */
        st_cope_z(pb->cope, pb->q + bh * pb->T * pb->D + i0 * pb->D, rb, pb->D, pb->scale, sb->Z);
        for (int64_t r = 0; r < rb; r++) sb->csum[r] = 0.0f;
    }
}

/* Attention statistics (pb->stats) of one row, online like l and acc. With w_j = exp(s_j - m)
 * over the keys so far and l = sum w_j, the row's running sums are
 *   st[0] = sum w_j d_j      (d_j = p - j, the key's distance)
 *   st[1] = sum w_j (s_j - m)
 *   st[2] = w of key 0
 *   st[3] = sum of w_j over d_j >= stats_far
 * so that, at the end, mean distance = st[0] / l, entropy = log l - st[1] / l (as
 * -sum p log p with p = w / l), first-key mass = st[2] / l, far mass = st[3] / l. A new
 * block with max mn rescales them by alpha = exp(m - mn), st[1] also shifting by (m - mn)
 * per unit of weight. e (n): the block's exp(s_j - mn); key e[t] is at distance d0 - t
 * from the query at position p (key 0 at distance p). */
static void stream_stats_rows(const st_attn_problem *pb, float *st, const float *e, int64_t n, int64_t p, int64_t d0,
                              float m, float mn, float l, float alpha) {
    if (m == -INFINITY) {   /* nothing so far (alpha = 0) */
        st[0] = st[1] = st[2] = st[3] = 0.0f;
    } else if (alpha != 1.0f) {
        st[1] = alpha * (st[1] + (m - mn) * l);
        st[0] *= alpha;
        st[2] *= alpha;
        st[3] *= alpha;
    }
    double sd = 0, sa = 0, sf = 0;
    for (int64_t t = 0; t < n; t++) {
        const float w = e[t];
        if (w <= 0.0f) continue;
        const int64_t d = d0 - t;
        sd += (double)w * (double)d;
        sa += (double)w * (double)logf(w);
        if (d >= pb->stats_far) sf += w;
        if (d == p) st[2] += w;
    }
    st[0] += (float)sd;
    st[1] += (float)sa;
    st[3] += (float)sf;
}

/* The row work of key block [j0, j1) once S (rb, nb) = scale Q K^T is in sb->Sc (and, for
 * clipped positions, the clipped scores in sb->G): bias, masks, CoPE, the online-softmax
 * update of m, l and acc, and the block's P (rb, nb) left in sb->Sc for acc += P V. */
static void stream_rows(const st_attn_problem *pb, int64_t bh, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                        int clipped, const stream_buf *sb) {
    const int64_t T = pb->T, D = pb->D, rb = i1 - i0, nb = j1 - j0, W = pb->window, koff = pb->koff;
    const int64_t S = W > 0 ? pb->sinks : 0, npos = pb->cope ? pb->cope->n_pos : 0;
    const float *rtab = pb->rtab ? pb->rtab + (bh % pb->H) * pb->rtab_len : NULL;
    const int dropout = pb->p_drop > 0.0f;
    const float keep = st_attn_keep_scale(pb->p_drop);
    const int h = (int)(bh % pb->H);
    float *Sc = sb->Sc, *G = sb->G, *m = sb->m, *l = sb->l;
    /* general bias: G[r][c] = bias(h, kpos + koff + i0 + r, kpos + j0 + c) */
    if (pb->gbias) pb->gbias->fill_block(pb->gbias, h, pb->kpos + koff + i0, rb, pb->kpos + j0, nb, G, nb);
    for (int64_t r = 0; r < rb; r++) {
        const int64_t i = i0 + r, p = i + koff;
        float *s = Sc + r * nb;
        /* keys of this block row i sees: the window part s[a, a + cnt) = keys [lo, hi),
         * and the sinks [j0, sh) below the window's lower bound lw; the gap between
         * them is masked, so the row's span is [j0 or lo, hi) */
        int64_t lw = W > 0 ? p - W + 1 : 0;
        const int64_t blo = st_attn_block_lo(pb, p);
        if (blo > lw) lw = blo;
        if (pb->doc && pb->doc[(bh / pb->H) * T + i] > lw) lw = pb->doc[(bh / pb->H) * T + i];
        int64_t hi = pb->causal ? (p + 1 < j1 ? p + 1 : j1) : j1;
        int64_t lo = lw > j0 ? lw : j0;
        lo = lo < j1 ? lo : j1;
        if (hi < lo) hi = lo;
        int64_t sh = S < lw ? S : lw;
        sh = sh < j1 ? sh : j1;
        sh = sh < p + 1 ? sh : p + 1;
        const int64_t span_lo = sh > j0 ? j0 : lo;
        int64_t a = span_lo - j0, cnt = hi - span_lo;
        if (cnt <= 0) { a = 0; cnt = 0; }
        float *sv = s + a;
        if (clipped)   /* keys j <= p - clip: relative position clipped to clip */
            for (int64_t j = j0, cut = p - pb->clip + 1 < j1 ? p - pb->clip + 1 : j1; j < cut; j++)
                s[j - j0] = G[r * nb + (j - j0)];
        /* the row's bias over [b0, hi): the whole span, or only the window part when
         * the sinks have their own (sink_bias: a cache whose rows are not positions) */
        const int own = sh > j0 && pb->sink_bias;
        const int64_t b0 = own ? lo : span_lo;
        if (rtab) {
            const float *br = rtab + (pb->rtab_top - p + b0);   /* br[j] = bias(p - b0 - j) */
            for (int64_t j = 0; j < hi - b0; j++) s[b0 - j0 + j] += br[j];
        } else if (pb->gbias) {
            const float *gr = G + r * nb;
            for (int64_t j = b0 - j0; j < hi - j0; j++) s[j] += gr[j];
        }
        if (pb->gate) {   /* FoX: log of the gates between key j and the query (row p) */
            const float *c = pb->gate + bh * pb->gate_stride, cp = c[p];
            for (int64_t j = span_lo; j < hi; j++) s[j - j0] += cp - c[j];
        }
        if (npos) st_cope_row_forward(sb->Z + r * npos, npos, sv, cnt, &sb->csum[r], NULL);
        if (own) {
            const int64_t R = pb->sink_rows > 0 ? pb->sink_rows : T, ri = i < R ? i : R - 1;
            const float *sbias = pb->sink_bias + ((size_t)h * (size_t)R + (size_t)ri) * (size_t)S;
            for (int64_t j = j0; j < sh; j++) s[j - j0] += sbias[j];
        }
        for (int64_t j = sh; j < lo && sh > j0; j++) s[j - j0] = -INFINITY;   /* the gap */
        const float bm = st_attn_max(sv, cnt);
        const float mn = m[r] > bm ? m[r] : bm;
        if (mn == -INFINITY) {   /* every key so far masked: contributes nothing */
            if (st_attn_has_nan(sv, cnt)) m[r] = l[r] = NAN;   /* a NaN block: the row is NaN */
            memset(s, 0, (size_t)nb * sizeof(float));
            continue;
        }
        const float alpha = st_attn_exp(m[r] - mn);   /* m = -inf -> 0 */
        const float sum = st_attn_exp_sum(sv, cnt, mn);
        for (int64_t j = 0; j < a; j++) s[j] = 0.0f;
        for (int64_t j = a + cnt; j < nb; j++) s[j] = 0.0f;
        for (int64_t j = sh; j < lo && sh > j0; j++) s[j - j0] = 0.0f;   /* exp(-inf) is 0 already: explicit */
        if (sb->st) stream_stats_rows(pb, sb->st + r * ST_ATTN_NSTATS, sv, cnt, p, p - span_lo, m[r], mn, l[r], alpha);
        l[r] = l[r] * alpha + sum;
        m[r] = mn;
        if (alpha != 1.0f) {
            float *ac = sb->acc + r * D;
            for (int64_t c = 0; c < D; c++) ac[c] *= alpha;
        }
        if (dropout)   /* self-attention only (training forward without grad) */
            for (int64_t j = 0; j < cnt; j++)
                sv[j] = st_attn_dropped(pb->seed, bh, T, i, span_lo + j, pb->p_drop) ? 0.0f : sv[j] * keep;
    }
}

/* After the last key block: out rows = acc / l. */
static void stream_end(const st_attn_problem *pb, int64_t bh, int64_t i0, int64_t i1, const stream_buf *sb) {
    const int64_t D = pb->D;
    float *O = pb->out + bh * pb->T * D + i0 * D;
    for (int64_t r = 0; r < i1 - i0; r++) {
        /* l == 0 only for a row with every key at -inf: its output is 0, not 0/0; l is NaN
         * for a row with a NaN score: its output is NaN */
        const float inv = sb->l[r] > 0.0f ? 1.0f / sb->l[r] : sb->l[r] != sb->l[r] ? NAN : 0.0f;
        for (int64_t c = 0; c < D; c++) O[r * D + c] = sb->acc[r * D + c] * inv;
    }
    for (int64_t r = 0; pb->stats && r < i1 - i0; r++) {   /* the row's statistics (stream_stats_rows) */
        const float *st = sb->st + r * ST_ATTN_NSTATS, l = sb->l[r];
        float *o = pb->stats + (bh * pb->T + i0 + r) * ST_ATTN_NSTATS;
        if (!(l > 0.0f)) { o[0] = o[1] = o[2] = o[3] = NAN; continue; }
        o[0] = st[0] / l;
        o[1] = logf(l) - st[1] / l;
        o[2] = st[2] / l;
        o[3] = st[3] / l;
    }
}

/* Clipped positions: the block holds a key at distance >= clip from the last row. */
static int stream_clipped(const st_attn_problem *pb, int64_t i1, int64_t j0) {
    return pb->q2 && j0 <= i1 - 1 + pb->koff - pb->clip;
}

/* Rows [j0, j1) of one pair's keys (or values) as fp32: the fp32 rows themselves, or the
 * bf16 rows widened into the tile w (exact: a bf16 is the top half of a float). */
static const float *stream_rows_f32(const float *f, const uint16_t *h, int64_t j0, int64_t j1, int64_t D, float *w) {
    if (!h) return f + j0 * D;
    const uint16_t *src = h + j0 * D;
    const int64_t n = (j1 - j0) * D;
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) w[i] = st_bf16_to_f32(src[i]);
    return w;
}

/* One (b,h) pair, query rows [i0, i1), its own products (fp32: cblas_sgemm inside the
 * parallel loop): out rows written, nothing else. */
static void stream_block(const st_attn_problem *pb, int64_t bh, int64_t i0, int64_t i1,
                         int64_t kblock, float *scratch) {
    const int64_t T = pb->T, D = pb->D, rb = i1 - i0, kvp = stream_kvp(pb, bh), ko = kvp * pb->kv_stride;
    const float *Q = pb->q + bh * T * D;
    const float *K = pb->k ? pb->k + ko : NULL, *V = pb->v ? pb->v + ko : NULL, *K2 = pb->k2 ? pb->k2 + ko : NULL;
    const uint16_t *Kh = pb->kh ? pb->kh + ko : NULL, *Vh = pb->vh ? pb->vh + ko : NULL;
    const uint16_t *K2h = pb->k2h ? pb->k2h + ko : NULL;
    const stream_buf sb = stream_buf_of(pb, kblock, scratch);
    const stream_keys ks = stream_keys_of(pb, i0, i1, kblock);
    stream_begin(pb, bh, i0, i1, &sb);
    for (int64_t kb = 0; kb < ks.nks + ks.nkw; kb++) {
        int64_t j0, j1;
        stream_block_keys(pb, &ks, kb, kblock, &j0, &j1);
        const int64_t nb = j1 - j0;
        /* S (rb, nb) = scale Q[i0:i1] K[j0:j1]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)nb, (int)D, pb->scale, Q + i0 * D, (int)D,
                    stream_rows_f32(K, Kh, j0, j1, D, sb.Kw), (int)D, 0.0f, sb.Sc, (int)nb);
        /* clipped positions: G (rb, nb) = scale Q2 K2^T (the rows' clipped scores) */
        const int clipped = stream_clipped(pb, i1, j0);
        if (clipped)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)nb, (int)D, pb->scale,
                        pb->q2 + bh * T * D + i0 * D, (int)D, stream_rows_f32(K2, K2h, j0, j1, D, sb.K2w), (int)D,
                        0.0f, sb.G, (int)nb);
        stream_rows(pb, bh, i0, i1, j0, j1, clipped, &sb);
        /* acc (rb, D) += P (rb, nb) V[j0:j1] (nb, D) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)D, (int)nb, 1.0f, sb.Sc, (int)nb,
                    stream_rows_f32(V, Vh, j0, j1, D, sb.Vw), (int)D, 1.0f, sb.acc, (int)D);
    }
    stream_end(pb, bh, i0, i1, &sb);
}

/* c_bh = alpha a_bh op(b_bh) + beta c_bh over every (b,h) pair in one batched product:
 * a at a0 + bh astride (leading dimension lda), b at b0 + bh kv_stride, c at c0 + bh per
 * (ldc); both operands fp32, rounded by the backend. */
static void stream_batched(st_mm *mm, const st_attn_problem *pb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *a0, int64_t astride, int64_t lda, const float *b0, int btrans, float beta,
                           float *c0, int64_t per, int64_t ldc) {
    const st_mm_batch bt = {pb->B * pb->H, astride, pb->kv_stride, per};
    st_mm_gemm_batched(mm, bt, M, N, K, alpha, st_mm_a(a0, NULL, 0, lda), st_mm_a(b0, NULL, btrans, pb->D), beta, c0,
                       ldc);
}

/* The block-major schedule's bf16 operands, every one dense per block (oneDNN 2.6 runs its
 * AMX brgemm on a batch only when each operand's matrices are packed back to back; with
 * any other batch stride it falls back to gemm:jit, slower than sgemm):
 *   K, V: the keys and values rounded once per call, key block kb of every pair back to
 *         back (BH, nb, D) at BH kb kblock D, when the key blocks are aligned (no window,
 *         stream_aligned); with a window (blocks start anywhere) one block of every pair,
 *         rounded per block
 *   Q:    the query block of every pair (BH, rb, D), rounded once per query block
 *   Sc, P: the scores (BH, rb, nb) fp32 and, after the row work, the probabilities in
 *         bf16, rounded by the thread that made them while they are in cache
 *   acc:  the accumulators (BH, rb, D), summed into by the product's sum post-op.
 * Rounding each key block inside the product instead (once per query block) put 18% of
 * an eval at L = 16,384 in that rounding (AMX Xeon, 2026-11-26). */
typedef struct stream_ops { float *Sc, *acc; uint16_t *P, *Q, *K, *V; } stream_ops;

/* 1 when every key block starts at a multiple of kblock: no window, and a blockwise
 * mask's block starts (multiples of block, from key row 0 at kpos 0) on that grid. */
static int stream_aligned(const st_attn_problem *pb, int64_t kblock) {
    return pb->window == 0 && (pb->block == 0 || (pb->kpos == 0 && pb->block % kblock == 0));
}

/* Key rows each of K and V holds per pair: all Tk (aligned blocks) or one block. */
static int64_t stream_ops_krows(const st_attn_problem *pb, int64_t kblock) {
    return stream_aligned(pb, kblock) ? pb->Tk : kblock;
}

/* The stream_ops' offsets in floats (off[0..5]: Sc, acc, P, Q, K, V); returns the total. */
static size_t stream_ops_layout(const st_attn_problem *pb, int64_t kblock, size_t off[6]) {
    const size_t BH = (size_t)(pb->B * pb->H), sq = (size_t)stream_qrows(pb), D = (size_t)pb->D, kb = (size_t)kblock;
    const size_t kr = (size_t)stream_ops_krows(pb, kblock);
    const size_t len[6] = {BH * sq * kb, BH * sq * D, (BH * sq * kb + 1) / 2, (BH * sq * D + 1) / 2,
                           (BH * kr * D + 1) / 2, (BH * kr * D + 1) / 2};   /* bf16 ones in floats */
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = at;
        at += aligned16(len[i]);
    }
    return at;
}

static size_t stream_ops_floats(const st_attn_problem *pb, int64_t kblock) {
    size_t off[6];
    return stream_ops_layout(pb, kblock, off);
}

static stream_ops stream_ops_of(const st_attn_problem *pb, int64_t kblock, float *mem) {
    size_t off[6];
    stream_ops_layout(pb, kblock, off);
    const stream_ops o = {mem + off[0], mem + off[1], (uint16_t *)(mem + off[2]), (uint16_t *)(mem + off[3]),
                          (uint16_t *)(mem + off[4]), (uint16_t *)(mem + off[5])};
    return o;
}

/* n consecutive values of each pair, pair bh at src + bh src_stride, into dst back to back */
static void stream_round_pairs(uint16_t *dst, const float *src, int64_t BH, int64_t src_stride, int64_t n) {
    st_bf16_round_strided(dst, src, BH, 1, n, n, src_stride);
}

/* The block-major schedule for a backend whose products must run outside parallel
 * regions (bf16: oneDNN, one primitive cache): per query block, for each key block, S of
 * every (b,h) pair in one batched product, the row work in parallel over pairs, then
 * acc += P V of every pair in one batched product. Every pair keeps its own online-
 * softmax state (the row part of its slot). The key blocks of a query block are the same
 * for every pair (they depend on rows and positions, not on b or h). With aligned key
 * blocks a causal block that ends before its pre-rounded block does (the query block's
 * last keys) is taken whole: the keys past the rows' last position are masked by the row
 * work (P = 0 there), so only the product's size changes.
 * scratch: BH row parts of rowp floats, then the stream_ops. */
static void stream_run_batched(st_mm *mm, const st_attn_problem *pb, int64_t kblock, float *scratch, size_t rowp) {
    const int64_t T = pb->T, D = pb->D, BH = pb->B * pb->H, Tk = pb->Tk;
    const int aligned = stream_aligned(pb, kblock);
    const stream_ops o = stream_ops_of(pb, kblock, scratch + (size_t)BH * rowp);
    if (aligned)
        for (int64_t j0 = 0; j0 < Tk; j0 += kblock) {
            const int64_t nb = j0 + kblock < Tk ? kblock : Tk - j0;
            stream_round_pairs(o.K + BH * j0 * D, pb->k + j0 * D, BH, pb->kv_stride, nb * D);
            stream_round_pairs(o.V + BH * j0 * D, pb->v + j0 * D, BH, pb->kv_stride, nb * D);
        }
    const int64_t qrows = stream_qrows(pb);
    for (int64_t i0 = 0; i0 < T; i0 += qrows) {
        const int64_t i1 = i0 + qrows < T ? i0 + qrows : T, rb = i1 - i0;
        const stream_keys ks = stream_keys_of(pb, i0, i1, kblock);
        stream_round_pairs(o.Q, pb->q + i0 * D, BH, T * D, rb * D);
#pragma omp parallel for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            stream_buf sb = stream_buf_of(pb, kblock, scratch + (size_t)bh * rowp);
            sb.acc = o.acc + bh * rb * D;
            stream_begin(pb, bh, i0, i1, &sb);
        }
        for (int64_t kb = 0; kb < ks.nks + ks.nkw; kb++) {
            int64_t j0, j1;
            stream_block_keys(pb, &ks, kb, kblock, &j0, &j1);
            const uint16_t *Kb = o.K, *Vb = o.V;
            if (aligned) {   /* the whole pre-rounded block */
                ST_ASSERT(j0 % kblock == 0);
                j1 = j0 + kblock < Tk ? j0 + kblock : Tk;
                Kb = o.K + BH * j0 * D;
                Vb = o.V + BH * j0 * D;
            } else {
                stream_round_pairs(o.K, pb->k + j0 * D, BH, pb->kv_stride, (j1 - j0) * D);
                stream_round_pairs(o.V, pb->v + j0 * D, BH, pb->kv_stride, (j1 - j0) * D);
            }
            const int64_t nb = j1 - j0;
            /* S (rb, nb) = scale Q K^T of every pair */
            const st_mm_batch s_bt = {BH, rb * D, nb * D, rb * nb};
            st_mm_gemm_batched(mm, s_bt, rb, nb, D, pb->scale, st_mm_a(NULL, o.Q, 0, D), st_mm_a(NULL, Kb, 1, D), 0.0f,
                               o.Sc, nb);
            const int clipped = stream_clipped(pb, i1, j0);
            if (clipped) {
                const stream_buf sb0 = stream_buf_of(pb, kblock, scratch);
                stream_batched(mm, pb, rb, nb, D, pb->scale, pb->q2 + i0 * D, T * D, D, pb->k2 + j0 * D, 1, 0.0f,
                               sb0.G, (int64_t)rowp, nb);
            }
#pragma omp parallel for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < BH; bh++) {
                stream_buf sb = stream_buf_of(pb, kblock, scratch + (size_t)bh * rowp);
                sb.Sc = o.Sc + bh * rb * nb;
                sb.acc = o.acc + bh * rb * D;
                stream_rows(pb, bh, i0, i1, j0, j1, clipped, &sb);
                uint16_t *ph = o.P + bh * rb * nb;
                #pragma omp simd
                for (int64_t x = 0; x < rb * nb; x++) ph[x] = st_f32_to_bf16(sb.Sc[x]);
            }
            /* acc (rb, D) += P (rb, nb) V (nb, D) of every pair */
            const st_mm_batch o_bt = {BH, rb * nb, nb * D, rb * D};
            st_mm_gemm_batched(mm, o_bt, rb, D, nb, 1.0f, st_mm_a(o.Sc, o.P, 0, nb), st_mm_a(NULL, Vb, 0, D), 1.0f,
                               o.acc, D);
        }
#pragma omp parallel for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            stream_buf sb = stream_buf_of(pb, kblock, scratch + (size_t)bh * rowp);
            sb.acc = o.acc + bh * rb * D;
            stream_end(pb, bh, i0, i1, &sb);
        }
    }
}

int64_t st_attn_stream_slots(const st_attn_problem *pb, int nthreads) {
    return st_attn_batched(pb->mm, ST_MM_ATTN_STREAM) ? pb->B * pb->H : nthreads;
}

void st_attn_stream_run(const st_attn_problem *pb, int64_t kblock, float *scratch, int nthreads) {
    const int64_t nq = (pb->T + ST_ATTN_SQBLOCK - 1) / ST_ATTN_SQBLOCK;
    const int64_t ntask = pb->B * pb->H * nq;
    ST_ASSERT(!(pb->gbias && pb->q2));   /* they share the tile */
    ST_ASSERT(!pb->doc || (pb->koff == 0 && pb->window == 0 && pb->block == 0 && !pb->cope));   /* self-attention rows */
    const size_t per = st_attn_stream_scratch_floats(pb, kblock);
    if (st_attn_batched(pb->mm, ST_MM_ATTN_STREAM)) {
        /* one key/value head per pair (uniform batch strides), fp32 rows */
        ST_ASSERT(pb->kv_group <= 1 && !pb->kh);
        stream_run_batched(pb->mm, pb, kblock, scratch, stream_row_floats(pb, kblock));
        return;
    }
    /* Tasks are (b,h,query block), so a single long sequence (B*H = 1) still uses every
     * thread. Causal blocks differ in cost (block q sees q+1 key ranges), so tasks go out
     * dearest first (the last query block of every pair, then the one before, ...) to
     * whichever thread is free; a cyclic static split gave one thread of two every odd
     * block. Each task writes only its own output rows, so the result does not depend on
     * the thread count or on which thread runs a task. */
    const int64_t BH = pb->B * pb->H;
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
    for (int64_t t = 0; t < ntask; t++) {
        const int64_t bh = t % BH, qb = nq - 1 - t / BH;
        const int64_t i0 = qb * ST_ATTN_SQBLOCK;
        const int64_t i1 = i0 + ST_ATTN_SQBLOCK < pb->T ? i0 + ST_ATTN_SQBLOCK : pb->T;
        stream_block(pb, bh, i0, i1, kblock, scratch + (size_t)omp_get_thread_num() * per);
    }
}

void st_attention_streamed(const float *q, const float *k, const float *v, float *out,
                           int64_t B, int64_t H, int64_t T, int64_t D,
                           const st_attn_bias *bias, int causal, float scale, int64_t kblock) {
    ST_ASSERT(B >= 0 && H >= 0 && T >= 0 && D > 0);
    if (B * H * T == 0) return;
    if (kblock <= 0) kblock = ST_ATTN_KBLOCK;
    if (kblock > T) kblock = T;
    const int nth = omp_get_max_threads();
    const int general = bias && !bias->fill && bias->fill_block;
    const st_attn_cope *cope = bias ? bias->cope : NULL;
    ST_ASSERT(!cope || causal);
    const size_t tab = bias && bias->fill ? (size_t)(H * st_attn_bias_len(T, causal)) : 0;
    st_attn_problem pb = st_attn_self(q, k, v, out, B, H, T, D, NULL, causal, scale, 0.0f, 0);
    pb.gbias = general ? bias : NULL;
    pb.cope = cope;
    st_attn_take_gate(&pb, bias);
    const size_t per = st_attn_stream_scratch_floats(&pb, kblock);
    /* This entry has no context (tests, benchmarks): its O(H*T + threads*block) scratch is
     * malloc'd. st_attention's inference path takes the same scratch from the arena. */
    float *mem = st_aligned_alloc((tab + (size_t)nth * per) * sizeof(float), NULL);
    if (!mem) {
        st_log(ST_LOG_ERROR, "attention_streamed: cannot allocate %zu bytes of scratch; output set to NaN",
               (tab + (size_t)nth * per) * sizeof(float));
        for (int64_t x = 0; x < B * H * T * D; x++) out[x] = NAN;
        return;
    }
    pb.rtab = tab ? mem : NULL;
    if (tab) st_attn_bias_tables(bias, H, T, causal, mem);
    st_attn_stream_run(&pb, kblock, mem + tab, nth);
    st_aligned_free(mem);
}
