/* st_ops.h - differentiable ops. Each op lives in src/ops/<name>.c with its forward and
 * backward kernels side by side. Every op:
 *   - allocates its output from ctx's arena and computes it immediately;
 *   - records a tape node when st_needs_grad() (grad mode and an input needs a gradient);
 *   - returns NULL if an input is NULL or the arena overflowed (ctx->failed), so a failure
 *     propagates to the caller, who reports it with st_ctx_check().
 * Shape legend: B batch, T time, C channels, H heads, D head size (C = H*D), V vocab,
 * N = any number of leading rows. Weights are stored [out, in] as in PyTorch. */
#ifndef ST_OPS_H
#define ST_OPS_H

#include "st_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y (N,OUT) = x (N,IN) @ W^T (IN,OUT) + b (OUT); x may have any leading dims, b may be NULL.
 * Every matmul goes through cblas_sgemm. */
st_tensor *st_linear(st_ctx *ctx, st_tensor *x, st_tensor *w, st_tensor *b);
/* Batched matmul: a (..,M,K) @ b (..,K,N) -> (..,M,N), same leading dims (or none). */
st_tensor *st_matmul(st_ctx *ctx, st_tensor *a, st_tensor *b);
/* Elementwise a + b (same shape): residual connections. */
st_tensor *st_add(st_ctx *ctx, st_tensor *a, st_tensor *b);
/* x (..,C) + b (C) broadcast over rows. */
st_tensor *st_bias(st_ctx *ctx, st_tensor *x, st_tensor *b);
/* x * s (scalar constant). */
st_tensor *st_scale(st_ctx *ctx, st_tensor *x, float s);
/* out (B,T,C) = table[ids] with ids int32 (B*T), table (V,C). Backward scatter-adds.
 * Ids must be in [0, V) (checked by the caller's data layer; asserted here). */
st_tensor *st_embedding(st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T, st_tensor *table);
/* LayerNorm over the last dim: (x - mean)/sqrt(var + eps) * w + b, biased variance. */
st_tensor *st_layernorm(st_ctx *ctx, st_tensor *x, st_tensor *w, st_tensor *b, float eps);
/* GELU: exact = 0 -> tanh approximation 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)));
 *       exact = 1 -> 0.5x(1+erf(x/sqrt 2)). */
st_tensor *st_gelu(st_ctx *ctx, st_tensor *x, int exact);
/* RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * w (no mean, no bias). */
st_tensor *st_rmsnorm(st_ctx *ctx, st_tensor *x, st_tensor *w, float eps);
/* The same over each of `groups` equal parts of the last dim (C = groups * D), w (C): a
 * group norm without the mean (model.out_norm: one group per head). */
st_tensor *st_rmsnorm_groups(st_ctx *ctx, st_tensor *x, st_tensor *w, int groups, float eps);
/* Gated linear unit: x (..,2F) = [a, b] -> act(a) * b (..,F); act = silu (swiglu) or
 * gelu, tanh or erf form (geglu). */
enum { ST_GLU_SWIGLU = 0, ST_GLU_GEGLU_TANH, ST_GLU_GEGLU_ERF, ST_GLU_COUNT };
st_tensor *st_glu(st_ctx *ctx, st_tensor *x, int kind);
/* a (..,C) times sigmoid(z) (..,G), G dividing C: value c takes gate c / (C/G) (G = C: one
 * gate per value; G = heads: one per head's D values). src/ops/sigmoid_gate.c */
st_tensor *st_sigmoid_gate(st_ctx *ctx, st_tensor *a, st_tensor *z);
/* Data-dependent token shift (model.kv_shift): x (B,H,T,D), z (B,T,H) logits ->
 * y[b,h,t] = s x[b,h,t-1] + (1 - s) x[b,h,t], s = sigmoid(z[b,t,h]); no predecessor at t = 0
 * or at an instance's first row under doc (B,T) (st_attention_doc's mask; NULL: none), and
 * prev (H,D) (B = 1, no gradient; NULL: none) as row -1 of a decoded chunk.
 * src/ops/token_shift.c */
st_tensor *st_token_shift(st_ctx *ctx, st_tensor *x, st_tensor *z, const float *prev, const int32_t *doc);
/* Inverted dropout with keep-mask from st_hash_uniform(seed, element index): identical
 * for any thread count; identity when p == 0 or !ctx->train. */
st_tensor *st_dropout(st_ctx *ctx, st_tensor *x, float p, uint64_t seed);
/* (B,T,C) -> (B,H,T,D) and back. */
st_tensor *st_split_heads(st_ctx *ctx, st_tensor *x, int H);
st_tensor *st_merge_heads(st_ctx *ctx, st_tensor *x);
/* qkv (B,T,3C) (q rows, then k, then v; head h uses cols h*D..(h+1)*D of each) ->
 * q, k, v each (B,H,T,D). One op, three outputs; returns 0 on failure. */
int st_split_qkv(st_ctx *ctx, st_tensor *qkv, int H, st_tensor **q, st_tensor **k, st_tensor **v);
/* The same for grouped-query attention: qkv (B,T,(H+2Hkv)D) -> q (B,H,T,D), k, v
 * (B,Hkv,T,D); Hkv divides H. */
int st_split_qkv_gqa(st_ctx *ctx, st_tensor *qkv, int H, int Hkv, st_tensor **q, st_tensor **k, st_tensor **v);
/* x (B,H,T,D) -> (B,H*g,T,D), head h of the output = head h/g of x (x itself when g = 1);
 * the backward sums each group's gradients. */
st_tensor *st_repeat_heads(st_ctx *ctx, st_tensor *x, int g);
/* Rotary position embedding (rotate-half convention, as GPT-NeoX / HF LLaMA) applied to
 * x (B,H,T,D) at absolute positions pos0..pos0+T-1; frequencies base^(-2i/D). */
st_tensor *st_rope(st_ctx *ctx, st_tensor *x, float base, int64_t pos0);
/* The same at the positions pos[0..T) (randomized training positions), NULL: pos0 + t. */
st_tensor *st_rope_pos(st_ctx *ctx, st_tensor *x, float base, int64_t pos0, const int64_t *pos);
/* y[b,h,t,:] = x[b,h,t,:] * s_h * f_t for x (B,H,T,D), s (H) or NULL (s_h = 1), f (T)
 * constants (copied): a per-(head, time) multiplier, e.g. log-n scaling of the queries. */
st_tensor *st_head_scale(st_ctx *ctx, st_tensor *x, st_tensor *s, const float *f);
/* Forget gates' running log (FoX, Lin et al. 2025): f (B,T,H) gate logits ->
 *   c[b,h,t] = sum_{l <= t} log sigmoid(f[b,l,h])      (B,H,T)
 * the c of st_attn_gate (a KV cache adds its text's last sum). The sum runs in double.
 * Backward: df[b,t,h] += sigmoid(-f[b,t,h]) sum_{u >= t} dc[b,h,u]. */
st_tensor *st_log_gate_cumsum(st_ctx *ctx, st_tensor *f);
/* xPos scale (Sun et al. 2022) on x (B,H,T,D), rotate-half pairing as st_rope: channels k
 * and k + D/2 at position t = pos0 + row times zeta_k^(sign (t - centre) / gamma),
 * zeta_k = (2k/D + 0.4)/1.4. Queries take sign +1, keys -1, so q'.k' depends on i - j
 * only; centre keeps both factors in float range at long positions (src/ops/xpos.c). */
st_tensor *st_xpos_scale(st_ctx *ctx, st_tensor *x, float gamma, int64_t pos0, int64_t centre, int sign);
/* The same at the positions pos[0..T) (randomized training positions), NULL: pos0 + t. */
st_tensor *st_xpos_scale_pos(st_ctx *ctx, st_tensor *x, float gamma, int64_t pos0, const int64_t *pos,
                             int64_t centre, int sign);
/* The same with the caller's frequencies inv_freq[D/2] (theta_i) and the output scaled by
 * qk_scale: y = qk_scale * R(p theta) x (inference-time transforms, st_transform.h). */
st_tensor *st_rope_freqs(st_ctx *ctx, st_tensor *x, const double *inv_freq, float qk_scale, int64_t pos0);
/* The same at the positions pos[0..T) (NULL: pos0 + t). */
st_tensor *st_rope_at(st_ctx *ctx, st_tensor *x, const double *inv_freq, float qk_scale, int64_t pos0,
                      const int64_t *pos);
/* Sum / mean of all elements -> scalar (shape (1)). */
st_tensor *st_sum(st_ctx *ctx, st_tensor *x);
st_tensor *st_mean(st_ctx *ctx, st_tensor *x);

/* Cross-entropy fused with log-softmax: logits (N,V), targets int32 (N) -> scalar mean
 * NLL over targets != ignore_index. tok_loss (N), if not NULL, receives each row's loss
 * (0 for ignored rows). */
st_tensor *st_cross_entropy(st_ctx *ctx, st_tensor *logits, const int32_t *targets,
                            int32_t ignore_index, float *tok_loss);
/* The LM head and the loss in one op: logits = x (N,C) @ W^T (C,V), then cross-entropy as
 * above. Logits are produced in row chunks and never kept: in grad mode the gradient wrt
 * x and W is formed chunk by chunk during the forward and scaled by the upstream
 * gradient in backward, so no (N,V) buffer outlives the call. */
st_tensor *st_linear_cross_entropy(st_ctx *ctx, st_tensor *x, st_tensor *w,
                                   const int32_t *targets, int32_t ignore_index, float *tok_loss);

/* ------------------------------------------------------------ attention ---- */
/* Additive position bias added to the attention scores, in one of two forms.
 *
 * Distance form (fill != NULL): the bias depends only on the head and the signed distance
 * d = i - j (query i, key j). ALiBi, ALiBi with a receptive field, T5 buckets, KERPLE and
 * Sandwich have this form, so the kernel never materialises a TxT bias: it asks for the
 * per-head table over the distances it needs and adds it on the fly.
 *   fill(self, h, d0, n, out): out[k] = bias(h, d0 + k) for k in [0, n).
 *   grad(self, h, d0, n, g): accumulate parameter gradients given g[k] = sum of
 *       dL/dscore over all (b, i, j) of head h with i - j = d0 + k. NULL if the bias has
 *       no parameters. Called from one thread at a time.
 * For causal attention d >= 0 only; for bidirectional attention d ranges over
 * [-(T-1), T-1].
 *
 * General form (fill == NULL, fill_block != NULL): the bias depends on the absolute
 * positions (i, j) of query and key, e.g. FIRE's f(psi(i-j) / psi(max(L, i))).
 *   fill_block(self, h, i0, ni, j0, nj, out, ld): out[r*ld + c] = bias(h, i0 + r, j0 + c)
 *       for r < ni, c < nj. Called concurrently from several threads (must only read
 *       its state); entries with j > i of a causal call are never read.
 *   grad_block(self, h, i0, ni, j0, nj, g, ld): accumulate parameter gradients given
 *       g[r*ld + c] = sum over the batch of dL/dscore(h, i0 + r, j0 + c) (0 where the key
 *       is masked). NULL if the bias has no parameters. Called from one thread at a time.
 * Self-attention (st_attention) uses positions i, j = 0..T-1; the KV cache passes the
 * absolute positions of the decoded tokens. The grad-mode kernel materialises the bias
 * (H,T,T) once per call (the probabilities it keeps are B times larger); the streamed
 * kernel asks for (query block, key block) tiles, so memory stays O(T).
 *
 * Content-dependent logits (CoPE, Golovneva et al. 2024) fit neither form: they need q and
 * k inside the kernel. A provider with `cope` set (alone, fill and fill_block NULL, or with
 * a bias) adds the contextual position term to the causal scores (src/ops/attention_cope.c):
 *   s0_ij = scale q_i.k_j + bias_ij,   g_ij = sigmoid(s0_ij) (0 where masked)
 *   P_ij = sum_{t=j..i} g_it,  p = min(P_ij, n_pos - 1),  z_i[m] = scale q_i.e_m
 *   s_ij = s0_ij + (1 - w) z_i[floor p] + w z_i[floor p + 1],   w = p - floor p
 * The grad-mode kernel keeps the gates (B,H,T,T) and z (B,H,T,n_pos) for the backward; the
 * streamed kernel and the KV cache visit key blocks from the newest to the oldest and carry
 * the running sum of the gates per query row, so memory stays linear in T.
 * A multiplier on q.k per (head, query), as
 * log-n scaling, is not a bias: it equals scaling q_i, which the model does before the
 * kernel (model.attn_scale). */
/* CoPE's contextual position embeddings: e (n_pos, D), shared by the heads of a layer;
 * ge: its gradient (accumulated), NULL when none is wanted. */
typedef struct st_attn_cope {
    const float *e;
    float *ge;
    int64_t n_pos;
} st_attn_cope;

/* Forgetting attention's gate term (FoX, Lin et al. 2025), per (b, h) pair and position:
 *   s_ij += c_i - c_j,   c_t = sum_{l <= t} log f_l   (f_l in (0, 1]: the forget gates)
 * so the weight of key j in row i is multiplied by f_{j+1} ... f_i, a decay that depends
 * on the tokens in between (a data-dependent ALiBi: constant f = e^-m is ALiBi's slope m).
 * c: pair bh's values at rows bh * stride + p, for every key row p a call reads (a query at
 * key row p reads c[p] too: self-attention c (B,H,T), stride T; a KV cache keeps one per
 * cached key). t: in grad mode, the (B,H,T) tensor c belongs to (the attention records it
 * as an input and accumulates dL/dc into its gradient), else NULL. */
typedef struct st_attn_gate {
    st_tensor *t;
    const float *c;
    int64_t stride;
} st_attn_gate;

typedef struct st_attn_bias {
    void (*fill)(const struct st_attn_bias *self, int h, int64_t d0, int64_t n, float *out);
    void (*grad)(const struct st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g);
    void *state;
    void (*fill_block)(const struct st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0,
                       int64_t nj, float *out, int64_t ld);
    void (*grad_block)(const struct st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0,
                       int64_t nj, const float *g, int64_t ld);
    const st_attn_cope *cope;   /* CoPE term on top of the bias (causal only); NULL: none */
    const st_attn_gate *gate;   /* FoX's gate term (causal only); NULL: none */
} st_attn_bias;
/* 1 when the bias itself (distance or general form, not CoPE) has learnable parameters. */
static inline int st_attn_bias_has_grad(const st_attn_bias *b) {
    return b && (b->fill ? b->grad != NULL : b->grad_block != NULL);
}
/* 1 when the provider has learnable parameters (bias gradients, CoPE's embeddings, a gate
 * tensor that wants its gradient). */
static inline int st_attn_bias_learnable(const st_attn_bias *b) {
    return st_attn_bias_has_grad(b) || (b && b->cope && b->cope->ge) ||
           (b && b->gate && b->gate->t && b->gate->t->requires_grad);
}

/* Fused multi-head attention: q,k,v (B,H,T,D) -> (B,H,T,D).
 *   score(i,j) = scale * q_i.k_j + bias(h, i - j)    (distance form; bias may be NULL)
 *              = scale * q_i.k_j + bias(h, i, j)     (general form, positions 0..T-1)
 *   causal: keys j <= i only; p = softmax over keys (then dropout p_drop in training);
 *   out_i = sum_j p(i,j) v_j.
 * scale <= 0 means 1/sqrt(D). Grad mode keeps the probabilities for backward; inference
 * mode streams over key blocks with an online softmax and needs O(T) memory per thread. */
st_tensor *st_attention(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                        const st_attn_bias *bias, int causal, float scale,
                        float p_drop, uint64_t seed);
/* The same with a per-instance (document) mask for packed rows: doc (B,T), row i of batch
 * row b sees keys j in [doc[b T + i], i] only (0 <= doc[b T + i] <= i; causal, no CoPE
 * term). Masked scores get probability 0, so their gradients (q, k, v and the bias's)
 * are 0 too. doc NULL: st_attention. The caller keeps doc alive until backward. */
st_tensor *st_attention_doc(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                            const st_attn_bias *bias, int causal, float scale,
                            float p_drop, uint64_t seed, const int32_t *doc);

/* Attention of new queries against keys and values kept between calls (a KV cache for
 * incremental decoding), inference only (nothing recorded for backward).
 *   q (B,H,Tq,D) contiguous: the newest Tq positions of the sequence, query r at key
 *     position p = Tk - Tq + r (their keys must already be in k, v);
 *   k, v: pair (b,h) holds keys 0..Tk-1 as rows of D floats from k + (b*H+h)*kv_stride;
 *   causal: key j <= p, and j > p - window when window > 0 (0: every cached key);
 *   bias_tab: NULL, or (H, bias_len) from st_attention_bias_table, with bias_len at least
 *     min(window, Tk) (window > 0) or Tk (window = 0) so that every distance is covered;
 *   gbias: NULL, or a general-form bias (bias_tab must then be NULL), evaluated at the
 *     absolute positions kpos0 + j of key row j and kpos0 + Tk - Tq + r of query r.
 * Returns (B,H,Tq,D) from ctx's arena; equal to rows Tk-Tq.. of st_attention over the
 * whole sequence (with the same bias) up to float rounding. */
st_tensor *st_attention_cached(st_ctx *ctx, st_tensor *q, const float *k, const float *v,
                               int64_t kv_stride, int64_t Tk, const float *bias_tab, int64_t bias_len,
                               const st_attn_bias *gbias, int64_t kpos0, int64_t window, float scale);
/* Which keys an inference-time mask leaves a causal query at position p (all fields 0,
 * or a NULL mask: every key j <= p):
 *   window > 0: keys j > p - window (its last `window` keys, itself included);
 *   sinks (with a window): keys j < sinks too (attention sinks, StreamingLLM);
 *   block > 0: blockwise causal attention (xPos, Sun et al. 2022): positions are cut into
 *     blocks of `block` and p sees its own block and the previous one, keys from
 *     (floor(p / block) - 1) block (block + 1 to 2 block keys once past the first block);
 *     positions count from the call's key 0 (a KV cache: from its kpos0);
 *   sink_bias: NULL (the sinks' bias by distance, as every key's), or (H, R, sinks) the
 *     bias of query row r on sink j when it is outside the row's window (sinks at cache
 *     positions), R = sink_rows (0: the call's query rows), rows r >= R taking row R - 1's
 *     (the rows past the cache cap).
 * Where both a window and a block are given a key must pass both. */
typedef struct st_attn_mask {
    int64_t sinks, window, block;
    const float *sink_bias;
    int64_t sink_rows;
} st_attn_mask;
/* The same with an inference-time mask (st_attn_mask; its window is the `window` above,
 * its sinks are cache rows 0..sinks-1, which stay visible to every query). sink_bias (H,
 * Tq, sinks): the bias of query r on sink row j (its rows are no positions once keys
 * between them and the window were dropped); required when there is a bias (bias_tab or
 * gbias) and sinks, else NULL.
 * kv: the cached keys and values, fp32 or bf16 (st_kv_rows). q2 (like q) and kv->k2:
 * clipped relative positions as st_attention_clipped (NULL: none). kv_group > 1:
 * grouped-query keys: k, v (and k2) hold H / kv_group heads per batch row (pair (b, h)
 * reads head h / kv_group); 1: H heads. */
typedef struct st_kv_rows {
    /* fp32: k, v (and rerope's unrotated k2, else NULL); pair (b,h) from bh * stride */
    const float *k, *v, *k2;
    /* bf16 instead (a bf16 KV cache; k, v, k2 then NULL): each key block is widened to fp32
     * (exactly) into per-thread tiles before its products, so the products are the fp32
     * kernel's on the rounded keys and values */
    const uint16_t *kh, *vh, *k2h;
    int64_t stride;   /* elements from one pair's rows to the next's */
} st_kv_rows;
st_tensor *st_attention_cached_sinks(st_ctx *ctx, st_tensor *q, const st_kv_rows *kv, int64_t Tk,
                                     const float *bias_tab, int64_t bias_len, const st_attn_bias *gbias,
                                     int64_t kpos0, float scale, const st_attn_mask *mask, st_tensor *q2,
                                     int64_t clip, int64_t kv_group);
/* Causal self-attention restricted to attention sinks + a window, inference only (the
 * streamed kernel; nothing recorded for backward): query i sees keys j with i - j < window
 * and keys j < sinks, bias as st_attention (distances i - j, positions 0..T-1).
 * window 0 = every key (sinks ignored). q, k, v (B,H,T,D) -> (B,H,T,D). */
st_tensor *st_attention_window(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                               const st_attn_bias *bias, float scale, int64_t sinks, int64_t window);
/* The same under any st_attn_mask (NULL: none), with clipped relative positions (ReRoPE):
 * a key at distance i - j >= clip scores scale q2_i.k2_j instead of scale q_i.k_j (q2 = q
 * rotated at position clip, k2 = the unrotated keys: relative position clip); q2 = k2 =
 * NULL: no clipping. A general bias cannot be combined with clipping.
 * q (and q2) may hold only the last Tq <= T query rows (B,H,Tq,D) of the T positions of k,
 * v (and k2): the result is those rows of the call with every query, bit for bit when
 * T - Tq is a multiple of st_attention_row_block() (a forward that needs the last rows
 * only: the last block in sliding-window evaluation); positions, the block mask's
 * included, are those of the T keys (0..T-1). */
st_tensor *st_attention_clipped(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v, st_tensor *q2,
                                st_tensor *k2, int64_t clip, const st_attn_bias *bias, float scale,
                                const st_attn_mask *mask);
/* The first key position a query at position p >= 0 sees under blocks of `block` tokens
 * (st_attn_mask.block): (floor(p / block) - 1) block, at least 0; 0 when block <= 0. */
int64_t st_attention_block_lo(int64_t block, int64_t p);
/* Query rows the streamed kernel takes per block under ctx's backend (see
 * st_attention_clipped). */
int64_t st_attention_row_block(const st_ctx *ctx);
/* tab (H, n): each head's causal bias over distances 0..n-1 in reversed order,
 * tab[h*n + m] = bias(h, n-1-m), the layout st_attention_cached reads. */
void st_attention_bias_table(const st_attn_bias *bias, int64_t H, int64_t n, float *tab);

/* Attention statistics per query row i, from the probabilities p_ij the streamed kernel
 * uses (ctx->attn_stats): [0] mean key distance sum_j p_ij (i - j), [1] entropy
 * -sum_j p_ij ln p_ij (nats), [2] p_i0, the mass on the first key, [3] the mass on keys at
 * distance >= ctx->attn_far. NAN for a row that sees no key. */
#define ST_ATTN_NSTATS 4
/* The streamed (online-softmax, key-blocked) forward, callable directly for tests and
 * benchmarks. kblock: keys per block (0 = default). */
void st_attention_streamed(const float *q, const float *k, const float *v, float *out,
                           int64_t B, int64_t H, int64_t T, int64_t D,
                           const st_attn_bias *bias, int causal, float scale, int64_t kblock);

#ifdef __cplusplus
}
#endif
#endif
