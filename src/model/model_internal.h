/* model_internal.h - the pieces of the causal LM's forward that the full forward
 * (model.c: st_model_hidden) and incremental decoding (decode.c: st_model_decode) share,
 * so a block is written once and both paths run the same ops in the same order.
 * Not a public header: nothing outside src/model/ includes it (and the decode test).
 *
 * A block, for x (B,T,C):
 *   q, k, v = st_block_qkv(x)              LN1, W_qkv, split into heads, RoPE at pos0..
 *   a = attention(q, k, v, st_block_bias)  the caller's: st_attention or st_attention_cached
 *   x = st_block_out(x, a)                 x += drop(W_o a); x += drop(FFN(LN2(x))) */
#ifndef ST_MODEL_INTERNAL_H
#define ST_MODEL_INTERNAL_H

#include "st_model.h"

/* x (B,T,C) = tok_emb[ids] (+ the method's positions pos0..pos0+T-1), then
 * embedding dropout. NULL on arena failure, or with *e set for learned positions past
 * the table. */
st_tensor *st_model_embed(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                          int64_t pos0, uint64_t seed, st_error *e);
/* model.abacus (abacus.c): x (B,T,C) plus each token's Abacus row (m->abacus_run0 and
 * m->abacus_k apply); x itself without a table. NULL on arena failure, or with *e set for
 * a run of digits past the table. */
st_tensor *st_abacus_embed(st_model *m, st_ctx *ctx, st_tensor *x, const int32_t *ids, int64_t B, int64_t T,
                           st_error *e);
/* The run of digits n tokens end in, continuing a run of run0 before them. */
int64_t st_abacus_run_end(const st_model_config *c, const int32_t *ids, int64_t n, int64_t run0);
/* Block l's queries (B,H,T,D), keys and values (B,Hkv,T,D: model.n_kv_heads) of x, transformed by the position method
 * at positions pos0.. (RoPE rotates them), queries log-n scaled (model.attn_scale; window:
 * the most keys a query sees, 0 = all before it). 0 on failure. */
int st_block_qkv(st_model *m, st_ctx *ctx, int l, st_tensor *x, int64_t pos0, int64_t window,
                 st_tensor **q, st_tensor **k, st_tensor **v);
/* Log-n attention scaling of block l's queries q (B,H,T,D) at positions pos0.. (src/model/
 * attn_scale.c): q_t * f(n_t), n_t = keys the query sees = min(pos0 + t + 1, window)
 * (window 0: no window). q unchanged for model.attn_scale none. */
st_tensor *st_attn_scale_q(st_model *m, st_ctx *ctx, int l, st_tensor *q, int64_t pos0, int64_t window);
/* The `window` of st_attn_scale_q, one rule for the full forward and the KV cache: the
 * most keys the mask leaves a query. A transform's sinks + window: K + W; else
 * cache_window (a sliding cache's --context; 0 in the full forward: no limit). */
int64_t st_attn_scale_keys(const struct st_transform *xf, int64_t cache_window);
/* The tensor model.attn_scale declares per block (learned_logn: "attn.logn_scale" (H),
 * init 0.43); 0 when none. */
int st_attn_scale_param(const st_model_config *c, const char **name, float *init);
/* The same, with a second query for the far keys (clip = st_model_q2_clip(m) > 0): rerope's
 * clipped positions (q2 = q rotated at position w, k2 = the unrotated keys) or the sinks at
 * their cache positions (q2 = q rotated at min(p, cap), k2 = k: sinks.c); NULL in *q2,
 * *k2 when there is none or no row needs it. q2, k2 NULL: not asked for. gate: FoX's c
 * (B,H,T) of the rows (the method's gate hook), NULL for other methods; must be asked for
 * when the method has one.
 * A method with a gate term (FoX) cannot go through st_block_qkv. */
int st_block_qkv2(st_model *m, st_ctx *ctx, int l, st_tensor *x, int64_t pos0, int64_t window, st_tensor **q,
                  st_tensor **k, st_tensor **v, st_tensor **q2, st_tensor **k2, st_tensor **gate);
/* Block l's position-bias provider (arena-owned: the backward reads it), NULL in *bias
 * for methods without one; gate: the gate term it carries (FoX: c from st_block_qkv2, or
 * a KV cache's rows), NULL for other methods. 0 on arena failure. */
int st_block_bias(st_model *m, st_ctx *ctx, int l, const st_attn_gate *gate, st_attn_bias **bias);
/* sinks.c: the attention's clip for a second query (rerope's w, or the window when the
 * sinks take their cache positions under a q/k method); 0: no second query. */
int64_t st_model_q2_clip(const st_model *m);
/* sinks.c: with cache positions and a q/k method, *q2 = q (B,H,T,D) with the rows at
 * positions pos0 + r > cap replaced by q_raw's (before the method) transformed at cap;
 * NULL when no row is past cap or there is nothing to do. 0 on arena failure. */
int st_block_sink_q(st_model *m, st_ctx *ctx, int l, st_tensor *q_raw, st_tensor *q, int64_t pos0, st_tensor **q2);
/* sinks.c: (H, R, S) the bias of the queries at positions p0.. on sink keys 0..S-1 of
 * layer l (at min(p, cap) with cache positions); NULL on arena failure. rows NULL: R = n,
 * one row per query; else R (in *rows) stops after the first row past cap, which stands
 * for the rest (st_attention_clipped's sink_rows). */
float *st_block_sink_bias(st_model *m, st_ctx *ctx, int l, int64_t n, int64_t S, int64_t p0, int64_t *rows);
/* The rest of block l given the attention output a (B,H,T,D): the residual stream x
 * after the attention and feed-forward sub-blocks. ls: the block's dropout seed. */
st_tensor *st_block_out(st_model *m, st_ctx *ctx, int l, st_tensor *x, st_tensor *a, uint64_t ls);
/* The block's variation points (block.c). The norm (model.norm) of x with weight and
 * bias parameter indices w, b (b -1 for rmsnorm); a linear layer whose bias index may be
 * -1 (model.bias false); block l's q/k norm (model.qk_norm; 0 on failure); its
 * feed-forward W2 act(W1 h) (model.ffn). */
st_tensor *st_block_norm(st_model *m, st_ctx *ctx, st_tensor *x, int w, int b);
st_tensor *st_block_linear(st_model *m, st_ctx *ctx, st_tensor *x, int w, int b);
int st_block_qk_norm(st_model *m, st_ctx *ctx, int l, st_tensor **q, st_tensor **k);
/* model.out_norm then model.out_gate: the merged attention output a (B,T,C) normalised per
 * head, then times sigmoid(W_g LN1(x)), the gate per value or per head; a itself with
 * neither. */
st_tensor *st_block_out_norm_gate(st_model *m, st_ctx *ctx, int l, st_tensor *x, st_tensor *a);
/* model.kv_shift: k and/or v (B,Hkv,T,D) token-shifted by gates from h = LN1(x) (B,T,C),
 * within m->doc's instances; while decoding (m->shift_rows) row -1 is the carried previous
 * token's (when m->shift_valid) and the chunk's last raw rows are carried on. 0 on failure. */
int st_block_kv_shift(st_model *m, st_ctx *ctx, int l, st_tensor *h, st_tensor **k, st_tensor **v);
st_tensor *st_block_ffn(st_model *m, st_ctx *ctx, int l, st_tensor *h);
/* Grouped-query attention: k, v (and k2 when not NULL) from n_kv_heads to n_heads heads
 * for the attention kernels that take one key head per query head (no-op without
 * groups). st_block_qkv2 returns them unexpanded (the KV cache keeps n_kv_heads). */
int st_block_expand_kv(st_model *m, st_ctx *ctx, st_tensor **k, st_tensor **v, st_tensor **k2);
/* The LM head's weight (V,C): tok_emb.weight when tied, else lm_head.weight. */
st_tensor *st_model_head_weight(st_model *m);
/* Inference: copy the block's output x over its input x_in and free everything the block
 * allocated after `mark`, so a forward holds one block's activations, not n_layers of
 * them. Returns the tensor to carry on with (x_in, or x where that cannot be done). */
st_tensor *st_block_keep(st_ctx *ctx, st_tensor *x_in, st_tensor *x, st_arena_mark mark);

#endif
