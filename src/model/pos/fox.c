/* fox.c - Forgetting Transformer (Lin, Nikishin, He, Courville 2025, "Forgetting
 * Transformer: Softmax Attention with a Forget Gate", ICLR 2025, arXiv 2503.02130): no
 * position signal but a forget gate per head and token,
 *   f_t = sigmoid(w_h . h_t + b_h)        h_t: the block's normalised input (LN1 / RMSNorm)
 *   logit_ij = q_i.k_j / sqrt(D) + sum_{l = j+1..i} log f_l
 * so key j's weight decays by the gates of the tokens after it: a data-dependent ALiBi
 * (a constant gate e^-m is ALiBi's slope m), learned, and able to keep a far key alive
 * when the tokens between say so (f near 1). Parameters per block: "attn.fgate.weight"
 * (H, C), normal(model.init_std) and decayed like any matrix, "attn.fgate.bias" (H), zero
 * (the official code's init: every gate starts near 1/2, a slope of ln 2 per token that
 * training relaxes). The running sums c_t = sum_{l <= t} log f_l are an op
 * (st_log_gate_cumsum, src/ops/forget_gate.c); the attention kernels add c_i - c_j
 * (st_attn_gate in include/st_ops.h). The term is relative (only the gates between
 * a key and its query count), so the KV cache slides: it keeps each cached key's c and
 * continues the sums from the last one. Choices where the paper's variants differ
 * (the "Pro" block's output gate, QK-norm and key shift; data-independent gates):
 * docs/position-methods.md. */
#include "pos.h"

enum { FOX_W = 0, FOX_B, FOX_NPARAM };

static int fox_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0) return 0;
    out[FOX_W] = (st_pos_decl){"attn.fgate.weight", 2, c->n_heads, c->d_model, 1, ST_INIT_NORMAL, c->init_std, 0};
    out[FOX_B] = (st_pos_decl){"attn.fgate.bias", 1, c->n_heads, 1, 0, ST_INIT_ZERO, 0, 0};
    return FOX_NPARAM;
}

/* c (B,H,T) of block `layer` from its normalised input h (B,T,C) */
static st_tensor *fox_gate(st_model *m, st_ctx *ctx, int layer, st_tensor *h) {
    st_tensor *logits = st_linear(ctx, h, st_pos_tensor(m, layer, FOX_W), st_pos_tensor(m, layer, FOX_B));
    return st_log_gate_cumsum(ctx, logits);   /* (B,T,H) -> (B,H,T) */
}

static void fox_bias_init(st_pos_bias *pb) {
    pb->iface.gate = &pb->gate;
    pb->iface.state = pb;
}

const st_pos_method st_pos_fox = {
    .name = "fox",
    .bias_form = ST_POS_BIAS_GENERAL,
    .slides = 1,
    .params = fox_params,
    .bias_init = fox_bias_init,
    .gate = fox_gate,
    .no_sinks = "its gates decay a key by every token after it; sinks would need the gates of the keys the window "
                "dropped (a window alone works)",
    .no_cache_positions = "it has no sinks (its gates decay over the dropped keys too)",
};
