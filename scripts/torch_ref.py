#!/usr/bin/python3
"""Independent PyTorch re-implementation of the stretch model, for reference checks.

Usage (called by tests/test_pytorch_ref.c):
    /usr/bin/python3 scripts/torch_ref.py DIR [DIR ...]
Each DIR holds config.json (the "model" section), model.safetensors (weights),
grads.safetensors (stretch's gradients), batch.json ({"ids": [[...]], "targets": [[...]],
"loss": float}) and optionally label.txt (the case's name, printed).
The model is rebuilt here from the documented math (docs/position-methods.md) in float64,
the loss and all gradients are computed by torch.autograd, and compared with stretch's.
Prints the loss and the worst gradient error per case (and each mismatching tensor),
writes DIR/verdict ("ok" or "mismatch"), and exits 1 on any mismatch beyond the tolerances.
"""
import json, math, os, struct, sys, traceback
import torch
import torch.nn.functional as F


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        b0, b1 = t["data_offsets"]
        arr = torch.frombuffer(bytearray(data[b0:b1]), dtype=torch.float32).clone()
        out[name] = arr.reshape(t["shape"]).to(torch.float64)
    return out


def alibi_slopes(n, max_bias=8.0):
    def pow2(n):
        start = 2.0 ** (-max_bias / n)
        return [start ** (i + 1) for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + alibi_slopes(2 * c, max_bias)[0::2][: n - c]


def alibi_head_slopes(cfg, H):
    """pos alibi: model.alibi_heads = K > 0 biases heads 0..K-1 with a K-head model's
    slopes and leaves the other H - K heads unbiased (slope 0; x-transformers pads the
    K-head bias with zeros the same way)"""
    K = cfg.get("alibi_heads", 0) or H
    return torch.tensor(alibi_slopes(K, cfg["alibi_max_bias"]) + [0.0] * (H - K), dtype=torch.float64)


def t5_bucket(rel, num_buckets, max_distance):
    # causal: n = max(-rel, 0)
    n = torch.clamp(-rel, min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.double().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return torch.where(is_small, n, large)


def positions(cfg, T):
    """the rows' positions: the batch's randomized training positions (train.random_positions,
    "positions" in batch.json) or 0..T-1"""
    P = cfg.get("_positions")
    return torch.arange(T) if P is None else P


def bias_for(cfg, p, layer, T, H):
    pos = cfg["pos"]
    i = positions(cfg, T)[:, None]
    j = positions(cfg, T)[None, :]
    d = (i - j).double().clamp(min=0)                      # causal distances
    if pos == "alibi":
        m = alibi_head_slopes(cfg, H)
        sc = cfg.get("scaling", {"transform": "none"})
        if sc["transform"] == "alibi_interp":              # slope interpolation m -> m / s
            m = m / sc["scale"]
        return -m[:, None, None] * d
    if pos == "alibi_rf":
        m = torch.tensor(alibi_slopes(H, cfg["alibi_max_bias"]))
        rf = cfg["rf"]
        if rf["scope"] == "fixed":
            rho = torch.full((H,), float(rf["rho"]))
        else:
            theta = p[f"blocks.{layer}.attn.rf_theta"]
            rho = torch.exp(theta) if rf.get("param", "softplus") == "log" else F.softplus(theta)
            rho = rho.expand(H) if theta.numel() == 1 else rho
        rho = rho[:, None, None]
        if rf["kind"] == "exp":
            f = torch.exp(-d / rho)
        elif rf["kind"] == "gaussian":
            f = torch.exp(-d * d / (2 * rho * rho))
        else:
            f = rho / (rho + d)
        return -m[:, None, None] * d * f
    if pos == "t5":
        w = p["t5.rel_bias"]                                  # [H, buckets]
        b = t5_bucket(j - i, cfg["t5_buckets"], cfg["t5_max_distance"])
        return w[:, b]
    if pos == "kerple":
        if cfg.get("kerple", {}).get("kind", "log") == "power":
            k = p[f"blocks.{layer}.attn.kerple_power"]        # [2, H]
            r1, r2 = F.softplus(k[0]), 2 * torch.sigmoid(k[1])
            # d^r2 with 0^r2 = 0; the where keeps log(0) out of the r2 gradient
            dpos = torch.where(d > 0, d, torch.ones_like(d))
            pw = torch.where(d > 0, dpos[None] ** r2[:, None, None], torch.zeros(1))
            return -r1[:, None, None] * pw
        k = p[f"blocks.{layer}.attn.kerple"]                  # [2, H]
        r1, r2 = F.softplus(k[0]), F.softplus(k[1])
        return -r1[:, None, None] * torch.log1p(r2[:, None, None] * d)
    if pos == "fire":
        pre = f"blocks.{layer}.attn.fire."
        c = torch.exp(p[pre + "log_c"])                       # [1]
        thr = torch.exp(p[pre + "log_thr"])                   # [1]
        psi = lambda z: torch.log(c * z + 1)
        ii = positions(cfg, T).double()[:, None]
        x = psi(d) / psi(torch.maximum(ii, thr))              # [T, T] in [0, 1]
        u = torch.relu(x[..., None] * p[pre + "w1"][:, 0] + p[pre + "b1"])   # [T, T, K]
        return (u @ p[pre + "w2"].T).permute(2, 0, 1)         # [H, T, T]
    if pos == "sandwich":
        Dp = cfg["d_model"] // H                              # D' = head size (NeMo)
        k = torch.arange(1, Dp // 2 + 1).double()
        inv = 1.0 / (10000.0 ** (2 * k / Dp))
        s = torch.cos(d[:, :, None] * inv).sum(-1) - Dp / 2   # [T, T], 0 at d = 0
        hs = torch.arange(1, H + 1).double()
        return s[None] / (8 * hs[:, None, None] / H)
    return None


def rope_theta(cfg, D):
    """RoPE frequencies theta_i = base^(-2i/D) and the factor on q and k, under the trained
    scaling model.scaling (docs/extension.md): PI theta/s; NTK base s^(D/(D-2)); YaRN
    ramps between theta/s and theta by r_i = L theta_i / 2pi (alpha, beta), with q and k
    times 0.1 ln s + 1 (Peng et al. 2023, eqs. 17-20)."""
    base = cfg["rope_base"]
    i = torch.arange(D // 2).double()
    theta = base ** (-2.0 * i / D)
    sc = cfg.get("scaling", {"transform": "none"})
    kind = sc["transform"]
    if kind == "pi":
        return theta / sc["scale"], 1.0
    if kind == "ntk":
        return (base * sc["scale"] ** (D / (D - 2))) ** (-2.0 * i / D), 1.0
    if kind == "yarn":
        s, a, b = sc["scale"], sc["yarn_alpha"], sc["yarn_beta"]
        r = sc["train_len"] * theta / (2 * math.pi)
        g = torch.clamp((r - a) / (b - a), 0.0, 1.0)
        return (1 - g) * theta / s + g * theta, 0.1 * math.log(s) + 1.0
    return theta, 1.0


def rope(x, cfg, P):
    B, H, T, D = x.shape
    half = D // 2
    inv, c = rope_theta(cfg, D)
    ang = P.double()[:, None] * inv[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return c * torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def xpos_scale(x, gamma, sign, P):
    """xPos (Sun et al. 2022): pair k of the rotate-half layout (channels k, k + D/2) times
    zeta_k^(sign * t / gamma), zeta_k = (2k/D + 0.4) / 1.4, at positions t = 0..T-1
    (float64: no centre needed at test lengths)."""
    B, H, T, D = x.shape
    zeta = (2 * torch.arange(D // 2).double() / D + 0.4) / 1.4
    s = zeta[None, :] ** (sign * P.double()[:, None] / gamma)
    return x * torch.cat([s, s], dim=-1)


def cope_term(q, s0, e, scale):
    """CoPE (Golovneva et al. 2024), from the scores s0 = q.k/sqrt(D) (+ -inf above the
    diagonal): gates sigmoid(s0), positions summed from each key to the query,
    clamped at n_pos - 1, and q.e/sqrt(D) interpolated linearly between integer rows."""
    npos = e.shape[0]
    gates = torch.sigmoid(s0)                              # 0 where masked
    pos = torch.flip(torch.cumsum(torch.flip(gates, [-1]), -1), [-1])
    pos = torch.clamp(pos, max=npos - 1)
    lo, hi = torch.floor(pos).long(), torch.ceil(pos).long()
    z = (q @ e.T) * scale                                  # (B, H, T, n_pos)
    w = pos - lo
    return torch.gather(z, -1, hi) * w + torch.gather(z, -1, lo) * (1 - w)


def fox_term(h, p, pre):
    """FoX (Lin et al. 2025): logit (i, j) += sum over l = j+1..i of log f_l, the forget
    gate f = sigmoid(h W^T + b) of each head at each token, from the block's normalised
    input h (B, T, C); (B, H, T, T), the upper triangle to be masked. The sum over
    (j, i] is a difference of running sums c_i - c_j (torch.cumsum in float64)."""
    f = h @ p[pre + "attn.fgate.weight"].T + p[pre + "attn.fgate.bias"]   # (B, T, H)
    c = torch.cumsum(F.logsigmoid(f), dim=1).transpose(1, 2)             # (B, H, T)
    return c[..., :, None] - c[..., None, :]


def embed(cfg, p, ids):
    """token embeddings (times model.embed_scale, 0 = sqrt(d_model) as in Vaswani et al.)
    plus the absolute positions of sinusoidal / learned"""
    T = ids.shape[1]
    C = p["tok_emb.weight"].shape[1]
    scale = cfg.get("embed_scale", 1.0)
    x = p["tok_emb.weight"][ids] * (scale if scale > 0 else math.sqrt(C))
    if cfg["pos"] == "sinusoidal":
        t = positions(cfg, T).double()[:, None]
        k = torch.arange(C)
        w = 10000.0 ** (-(k - (k % 2)).double() / C)
        pe = torch.where(k % 2 == 0, torch.sin(t * w), torch.cos(t * w))
        x = x + pe
    elif cfg["pos"] == "learned":
        x = x + p["pos_emb.weight"][positions(cfg, T)]
    return x + abacus(cfg, p, ids)


def abacus(cfg, p, ids):
    """model.abacus (McLeish et al. 2024, arXiv 2405.17399): the i-th digit of a run of digit
    tokens ("0".."9" = ids digit0..digit0+9) reads row i + k of abacus_emb, every other token
    row 0; k is the batch's training offset (train.abacus_max_k, "abacus_k" in batch.json)"""
    ab = cfg.get("abacus", {})
    if ab.get("rows", 0) == 0:
        return 0.0
    d0 = ab["digit0"]
    digit = (ids >= d0) & (ids < d0 + 10)
    t = torch.arange(ids.shape[1]).expand_as(ids)
    # the latest non-digit at or before t (-1: none yet); a digit's place is its distance
    last_other = torch.where(digit, torch.full_like(t, -1), t).cummax(dim=1).values
    row = torch.where(digit, t - last_other + cfg.get("_abacus_k", 0), torch.zeros_like(t))
    return p["abacus_emb.weight"][row]


def norm(cfg, x, p, name, eps):
    """model.norm: LayerNorm (weight, bias) or RMSNorm x / sqrt(mean(x^2) + eps) * weight"""
    if cfg.get("norm", "layernorm") == "rmsnorm":
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * p[name + ".weight"]
    return F.layer_norm(x, (x.shape[-1],), p[name + ".weight"], p[name + ".bias"], eps)


def qk_norm(cfg, x, w, eps):
    """model.qk_norm of q or k (B, heads, T, D), before the positions: RMS over each head's
    D values with weights (D) shared by the heads (rmsnorm, Qwen 3) or each head's own
    (heads*D) (rmsnorm_heads, FoX Pro), or over the token's whole heads*D row
    (rmsnorm_full, OLMo 2: RMSNorm of the projection before it is split into heads)"""
    kind = cfg.get("qk_norm", "none")
    if kind == "none":
        return x
    if kind != "rmsnorm":
        w = w.reshape(x.shape[1], 1, x.shape[3])
    dims = (1, 3) if kind == "rmsnorm_full" else (-1,)
    return x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + eps) * w


def lin(cfg, x, p, name):
    """x W^T (+ b unless model.bias is false)"""
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if cfg.get("bias", True) else y


def ffn(cfg, h, p, pre):
    """model.ffn: W2 gelu(W1 h), or W2 (act(gate) * value) with W1 = [gate rows; value rows]"""
    approx = "none" if cfg["gelu"] == "erf" else "tanh"
    h = lin(cfg, h, p, pre + "ffn.fc1")
    kind = cfg.get("ffn", "gelu")
    if kind == "gelu":
        h = F.gelu(h, approximate=approx)
    else:
        a, b = h.chunk(2, dim=-1)
        h = (F.silu(a) if kind == "swiglu" else F.gelu(a, approximate=approx)) * b
    return lin(cfg, h, p, pre + "ffn.fc2")


def out_gate(cfg, a, h, p, pre):
    """model.out_gate (Qiu et al. 2025): the merged attention output a (B, T, C) times
    sigmoid(h W_g^T) of the block's normalised input h, per value (W_g C x C) or per head
    (W_g H x C, each gate over the head's D values); no bias"""
    kind = cfg.get("out_gate", "none")
    if kind == "none":
        return a
    g = torch.sigmoid(h @ p[pre + "attn.out_gate.weight"].T)
    if kind == "headwise":
        B, T, C = a.shape
        return (a.reshape(B, T, g.shape[-1], -1) * g[..., None]).reshape(B, T, C)
    assert kind == "elementwise", kind
    return a * g


def kv_shift(cfg, k, v, h, p, pre, doc=None):
    """model.kv_shift (the Forgetting Transformer's Pro block, ShiftLinear): per key/value
    head x_t <- s x_{t-1} + (1 - s) x_t, s = sigmoid(h W^T), W (n_kv_heads x C), of k and/or
    v (B, Hkv, T, D) before the q/k norm and the positions; a row with no predecessor (t = 0,
    or a packed instance's first token: doc[b][t] = t) mixes in zeros"""
    kind = cfg.get("kv_shift", "none")
    T = k.shape[2]
    has = torch.arange(T)[None, :] > 0 if doc is None else doc < torch.arange(T)[None, :]   # (B or 1, T)

    def shift(x, w):
        s = torch.sigmoid(h @ w.T).transpose(1, 2)[..., None]   # (B, Hkv, T, 1)
        prev = torch.cat([torch.zeros_like(x[:, :, :1]), x[:, :, :-1]], dim=2) * has[:, None, :, None]
        return s * prev + (1 - s) * x
    if kind in ("key", "both"):
        k = shift(k, p[pre + "attn.k_shift.weight"])
    if kind in ("value", "both"):
        v = shift(v, p[pre + "attn.v_shift.weight"])
    return k, v


def out_norm(cfg, a, p, pre, H, eps):
    """model.out_norm: the merged attention output a (B, T, C) RMS-normalised per head over
    its D values, times the weights (C) (a GroupNorm without the mean)"""
    if cfg.get("out_norm", "none") == "none":
        return a
    B, T, C = a.shape
    a = a.reshape(B, T, H, C // H)
    a = a * torch.rsqrt((a * a).mean(-1, keepdim=True) + eps)
    return a.reshape(B, T, C) * p[pre + "attn.out_norm.weight"]


def logits(cfg, p, ids):
    """(B, T, V) next-token logits of ids (B, T)"""
    B, T = ids.shape
    C = p["tok_emb.weight"].shape[1]
    H, L = cfg["n_heads"], cfg["n_layers"]
    D = C // H
    eps = cfg["ln_eps"]
    x = embed(cfg, p, ids)
    mask = torch.ones(T, T).tril().bool()
    if "_window" in cfg:   # sliding-window attention: query i sees keys i - W < j <= i
        mask = mask & (torch.arange(T)[:, None] - torch.arange(T)[None, :] < cfg["_window"])
    if "_doc" in cfg:   # data.task.doc_mask: row i of batch row b sees keys j >= doc[b][i] only
        doc = cfg["_doc"]
        mask = mask[None, None] & (torch.arange(T)[None, None, None, :] >= doc[:, None, :, None])
    for l in range(L):
        pre = f"blocks.{l}."
        h = norm(cfg, x, p, pre + "ln1", eps)
        qkv = lin(cfg, h, p, pre + "attn.qkv")
        Hkv = cfg.get("n_kv_heads", -1)
        Hkv = H if Hkv in (-1, None) else Hkv      # grouped-query: Hkv key/value heads
        q, k, v = qkv.split([H * D, Hkv * D, Hkv * D], dim=-1)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k, v = [z.reshape(B, T, Hkv, D).transpose(1, 2) for z in (k, v)]
        k, v = kv_shift(cfg, k, v, h, p, pre, cfg.get("_doc"))
        if cfg.get("qk_norm", "none") != "none":
            q = qk_norm(cfg, q, p[pre + "attn.q_norm.weight"], eps)
            k = qk_norm(cfg, k, p[pre + "attn.k_norm.weight"], eps)
        if cfg["pos"] in ("rope", "xpos"):
            P = positions(cfg, T)
            q, k = rope(q, cfg, P), rope(k, cfg, P)
        if cfg["pos"] == "xpos":
            g = cfg["xpos"]["gamma"]
            q, k = xpos_scale(q, g, 1.0, P), xpos_scale(k, g, -1.0, P)
        # log-n scaling of the queries: n = i + 1 keys seen (causal)
        n = torch.arange(1, T + 1).double()
        if cfg.get("attn_scale", "none") == "logn":
            L_ = float(cfg["attn_scale_len"])
            q = q * torch.clamp(torch.log(n) / math.log(L_), min=1.0)[:, None]
        elif cfg.get("attn_scale", "none") == "learned_logn":
            sh = p[pre + "attn.logn_scale"]                   # [H]
            q = q * (sh[:, None, None] * torch.log(n)[:, None])
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        bias = bias_for(cfg, p, l, T, H)
        if bias is not None:
            s = s + bias[None]
        if cfg["pos"] == "fox":
            s = s + fox_term(h, p, pre)
        s = s.masked_fill(~mask, float("-inf"))
        if cfg["pos"] == "cope":
            s = s + cope_term(q, s, p[pre + "attn.cope_pos"], 1 / math.sqrt(D))
        a = torch.softmax(s, dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, C)
        a = out_gate(cfg, out_norm(cfg, a, p, pre, H, eps), h, p, pre)
        x = x + lin(cfg, a, p, pre + "attn.out")
        x = x + ffn(cfg, norm(cfg, x, p, pre + "ln2", eps), p, pre)
    x = norm(cfg, x, p, "ln_f", eps)
    head = p["tok_emb.weight"] if cfg["tie_embeddings"] else p["lm_head.weight"]
    return x @ head.T


def forward(cfg, p, ids, targets):
    """the mean cross-entropy over the targets that are not -1"""
    z = logits(cfg, p, ids)
    return F.cross_entropy(z.reshape(-1, z.shape[-1]), targets.reshape(-1), ignore_index=-1)


def check_case(d):
    """Loss and every gradient of the case in directory d; True when they match."""
    cfg = json.load(open(f"{d}/config.json"))
    cfg = cfg.get("model", cfg)
    p = load_safetensors(f"{d}/model.safetensors")
    g_c = load_safetensors(f"{d}/grads.safetensors")
    batch = json.load(open(f"{d}/batch.json"))
    ids = torch.tensor(batch["ids"])
    tg = torch.tensor(batch["targets"])
    if "positions" in batch:
        cfg["_positions"] = torch.tensor(batch["positions"])
    if "doc" in batch:
        cfg["_doc"] = torch.tensor(batch["doc"])
    cfg["_abacus_k"] = batch.get("abacus_k", 0)
    for t in p.values():
        t.requires_grad_(True)
    loss = forward(cfg, p, ids, tg)
    loss.backward()
    ok = True
    dl = abs(loss.item() - batch["loss"])
    line_ok = dl <= 1e-5 * max(1.0, abs(loss.item()))
    ok &= line_ok
    print(f"  loss torch {loss.item():.8f} stretch {batch['loss']:.8f} |diff| {dl:.2e} {'ok' if line_ok else 'MISMATCH'}")
    worst = 0.0
    for name, t in p.items():
        gt = t.grad if t.grad is not None else torch.zeros_like(t)
        gc = g_c[name]
        scale = max(gt.abs().max().item(), 1e-3)
        err = (gt - gc).abs().max().item() / scale
        worst = max(worst, err)
        # float32 forward/backward in stretch vs float64 here: relative to the tensor's scale
        good = err <= 1e-5
        ok &= good
        if not good:
            print(f"  {name}: max |diff|/scale {err:.2e} MISMATCH")
    print(f"  gradients: {len(p)} tensors, worst max|diff|/max|grad| {worst:.2e} {'ok' if ok else 'MISMATCH'}")
    return ok


def run_cases(check, usage):
    """Each case directory of the command line is checked in turn by check(dir) -> bool (one
    interpreter for all: importing torch costs ~1.5 s), its verdict written to DIR/verdict
    ("ok" or "mismatch"); exits 1 if any case mismatched or failed to run."""
    torch.set_default_dtype(torch.float64)
    if len(sys.argv) < 2:
        sys.exit(f"usage: {usage} CASE_DIR [CASE_DIR ...]")
    all_ok = True
    for d in sys.argv[1:]:
        label = open(f"{d}/label.txt").read().strip() if os.path.exists(f"{d}/label.txt") else d
        print(f"[{label}]")
        try:
            ok = check(d)
        except Exception:   # one broken case must not hide the verdicts of the others
            traceback.print_exc(file=sys.stdout)
            ok = False
        sys.stdout.flush()
        with open(f"{d}/verdict", "w") as f:
            f.write("ok\n" if ok else "mismatch\n")
        all_ok &= ok
    sys.exit(0 if all_ok else 1)


def main():
    run_cases(check_case, "torch_ref.py")


if __name__ == "__main__":
    main()
