#!/usr/bin/python3
"""Float64 PyTorch reference for the inference-time transforms (docs/evaluation.md).

Usage (called by tests/test_transforms.c):
    /usr/bin/python3 scripts/torch_ref_transforms.py DIR [DIR ...]
Each DIR holds config.json ({"model": {...}, "transform": {"kind", "scale", "sinks", "window",
"positions", "clip", "block", "train_len", "n"}}), model.safetensors and batch.json ({"ids": [[...]],
"logits": [[[...]]]}, stretch's logits). The model is rebuilt from the documented math with
the transform written out here (RoPE frequencies, YaRN's temperature, ALiBi slopes, the
sinks + window mask, the sinks at their cache positions, the blockwise mask), and stretch's logits are compared
with these; the verdict ("ok", "mismatch" or "error") goes to DIR/verdict too. Exits 1 on
any mismatch.
The position biases of the trained methods come from scripts/torch_ref.py.
"""
import json, math, os, sys, traceback
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  (load_safetensors, alibi_slopes, bias_for)


def scale_of(xf, cur_len):
    """s: explicit, or max(1, n / L); dynamic_ntk: max(1, current length / L)."""
    if xf["kind"] == "none":
        return 1.0
    if xf["kind"] == "dynamic_ntk":
        return max(1.0, cur_len / xf["train_len"])
    if xf["scale"] > 0:
        return xf["scale"]
    return max(1.0, xf["n"] / xf["train_len"])


def rope_freqs(xf, D, base, cur_len):
    """(theta (D/2,), factor on q and k)"""
    i = torch.arange(D // 2, dtype=torch.float64)
    theta = base ** (-2.0 * i / D)
    kind, s = xf["kind"], scale_of(xf, cur_len)
    if kind == "pi":                               # Chen et al.: positions m -> m / s
        return theta / s, 1.0
    if kind in ("ntk", "dynamic_ntk"):             # base' = base s^(D/(D-2))
        b = base * s ** (D / (D - 2))
        return b ** (-2.0 * i / D), 1.0
    if kind == "yarn":                             # Peng et al. eqs. 17-20
        wavelength = 2 * math.pi / theta
        r = xf["train_len"] / wavelength           # rotations within the training length
        alpha, beta = 1.0, 32.0
        gamma = torch.clamp((r - alpha) / (beta - alpha), 0.0, 1.0)
        h = (1 - gamma) * theta / s + gamma * theta
        sqrt_inv_t = 0.1 * math.log(s) + 1.0        # sqrt(1/t)
        return h, sqrt_inv_t
    return theta, 1.0


def rotate(x, theta, c, pos=None):
    """x (B,H,T,D) rotated at positions pos (T,), default 0..T-1"""
    T, half = x.shape[2], x.shape[3] // 2
    if pos is None:
        pos = torch.arange(T)
    ang = pos.double()[:, None] * theta[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return c * torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def visible(T, xf):
    """causal mask restricted to the first `sinks` keys and the last `window` keys, or
    to the query's own block of `block` positions and the block before it (blockwise
    causal attention, xPos's inference setup)"""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    m = j <= i
    if xf["window"] > 0:
        m = m & ((i - j < xf["window"]) | (j < xf["sinks"]))
    b = xf.get("block", 0)
    if b > 0:
        m = m & (j // b >= i // b - 1)
    return m


def sinks_far(T, xf):
    """(far (T,T), cap): far marks a sink outside its query's window whose query is past
    cap = sinks + window - 1, when the sinks take their positions in a cache that holds
    the sinks, then the window (StreamingLLM): that query sits at cap, the sink at j, so
    their distance is cap - j instead of i - j; every other pair keeps i - j."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    cap = xf["sinks"] + xf["window"] - 1
    if xf.get("positions", "text") != "cache" or xf["window"] <= 0:
        return torch.zeros(T, T, dtype=torch.bool), cap
    return (j < xf["sinks"]) & (i - j >= xf["window"]) & (i > cap), cap


def attn_stats(P, far, rows_from=0):
    """per head (H, 4): the means over batch rows and query rows >= rows_from (a sliding
    window's scored rows) of the attention's mean key distance, entropy (nats), mass on key
    0 and mass at distance >= far (stretch eval --attn-stats); P (B,H,T,T) the probabilities"""
    T = P.shape[-1]
    d = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double()
    dist = (P * d.clamp(min=0)).sum(-1)
    ent = -(P * torch.log(torch.where(P > 0, P, torch.ones_like(P)))).sum(-1)
    first = P[..., 0]
    farm = (P * (d >= far).double()).sum(-1)
    return torch.stack([z[:, :, rows_from:].mean(dim=(0, 2)) for z in (dist, ent, first, farm)], dim=-1)


def logits(cfg, xf, p, ids, stats=None, stats_far=0, stats_from=0):
    B, T = ids.shape
    V, C = p["tok_emb.weight"].shape
    H, nl = cfg["n_heads"], cfg["n_layers"]
    D = C // H
    Hkv = cfg.get("n_kv_heads", -1)
    Hkv = H if Hkv in (-1, 0, None) else Hkv       # grouped-query: Hkv key/value heads
    eps = cfg["ln_eps"]
    pos = cfg["pos"]
    # docs/extension.md: an explicit transform replaces the model's trained scaling
    # (model.scaling.*); sinks + window alone keep it and add the mask
    if xf["kind"] != "none":
        cfg = dict(cfg, scaling={"transform": "none"})
    x = torch_ref.embed(cfg, p, ids)
    mask = visible(T, xf)
    nkeys = mask.sum(-1).double()                  # the keys each query sees (log-n's n)
    far, cap = sinks_far(T, xf)
    dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    dist = torch.where(far, cap - torch.arange(T)[None, :].expand(T, T), dist)
    if pos in ("rope", "xpos"):
        theta, c = rope_freqs(xf, D, cfg["rope_base"], T) if xf["kind"] != "none" else torch_ref.rope_theta(cfg, D)
    for l in range(nl):
        pre = f"blocks.{l}."
        h = torch_ref.norm(cfg, x, p, pre + "ln1", eps)
        q, k, v = torch_ref.lin(cfg, h, p, pre + "attn.qkv").split([H * D, Hkv * D, Hkv * D], dim=-1)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k, v = [z.reshape(B, T, Hkv, D).transpose(1, 2) for z in (k, v)]
        k, v = torch_ref.kv_shift(cfg, k, v, h, p, pre)   # over the text: masks do not cut it
        if cfg.get("qk_norm", "none") != "none":   # before the positions
            q = torch_ref.qk_norm(cfg, q, p[pre + "attn.q_norm.weight"], eps)
            k = torch_ref.qk_norm(cfg, k, p[pre + "attn.k_norm.weight"], eps)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        # log-n attention scaling: the query times f(n), n = the keys the mask leaves it
        # (docs/position-methods.md, model.attn_scale), so the content term only
        sc = cfg.get("attn_scale", "none")
        if sc == "logn":
            q = q * torch.clamp(torch.log(nkeys) / math.log(cfg["attn_scale_len"]), min=1.0)[:, None]
        elif sc == "learned_logn":
            q = q * (p[pre + "attn.logn_scale"][:, None, None] * torch.log(nkeys)[:, None])
        q_raw, k_raw = q, k
        if pos in ("rope", "xpos"):
            q, k = rotate(q, theta, c), rotate(k, theta, c)
        if pos == "xpos":   # pair k times zeta_k^(+-t/gamma) at the text positions t
            g, P = cfg["xpos"]["gamma"], torch.arange(T)
            q, k = torch_ref.xpos_scale(q, g, 1.0, P), torch_ref.xpos_scale(k, g, -1.0, P)
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        if pos == "rope" and far.any():   # the sinks seen from the query moved to cap
            qc = rotate(q_raw, theta, c, torch.clamp(torch.arange(T), max=cap))
            s = torch.where(far, qc @ k.transpose(-1, -2) / math.sqrt(D), s)
        if xf["kind"] == "rerope":   # relative positions clipped at w (bojone/rerope)
            w = xf["clip"]
            theta, _ = rope_freqs(xf, D, cfg["rope_base"], T)
            ang = w * theta                               # every query at position w, keys unrotated
            cos, sin = torch.cos(ang), torch.sin(ang)
            h2 = D // 2
            q1, q2 = q_raw[..., :h2], q_raw[..., h2:]
            qw = torch.cat([q1 * cos - q2 * sin, q2 * cos + q1 * sin], dim=-1)
            s_far = qw @ k_raw.transpose(-1, -2) / math.sqrt(D)
            dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
            s = torch.where(dist < w, s, s_far)
        if pos == "alibi" and xf["kind"] == "alibi_interp":   # m -> m / s
            m = torch_ref.alibi_head_slopes(cfg, H) / scale_of(xf, T)
            d = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double().clamp(min=0)
            bias = -m[:, None, None] * d
        else:
            bias = torch_ref.bias_for(cfg, p, l, T, H)
        if bias is not None and far.any():   # b(d) = bias[h, T-1, T-1-d], read at each pair's distance
            bias = bias[:, T - 1, :].flip(-1)[:, dist.clamp(min=0)]
        if bias is not None:
            s = s + bias[None]
        if pos == "fox":   # the gates between key and query, at text positions
            s = s + torch_ref.fox_term(h, p, pre)
        s = s.masked_fill(~mask, float("-inf"))
        if pos == "cope":   # gates from the masked scores: a window counts its own keys only
            s = s + torch_ref.cope_term(q, s, p[pre + "attn.cope_pos"], 1 / math.sqrt(D))
        P = torch.softmax(s, dim=-1)
        if stats is not None:
            stats.append(attn_stats(P, stats_far, stats_from))
        a = (P @ v).transpose(1, 2).reshape(B, T, C)
        a = torch_ref.out_gate(cfg, torch_ref.out_norm(cfg, a, p, pre, H, eps), h, p, pre)
        x = x + torch_ref.lin(cfg, a, p, pre + "attn.out")
        x = x + torch_ref.ffn(cfg, torch_ref.norm(cfg, x, p, pre + "ln2", eps), p, pre)
    x = torch_ref.norm(cfg, x, p, "ln_f", eps)
    head = p["tok_emb.weight"] if cfg["tie_embeddings"] else p["lm_head.weight"]
    return x @ head.T


def check(d):
    """compares the case in DIR d; True when it matches"""
    doc = json.load(open(f"{d}/config.json"))
    cfg, xf = doc["model"], doc["transform"]
    p = torch_ref.load_safetensors(f"{d}/model.safetensors")
    batch = json.load(open(f"{d}/batch.json"))
    stats = [] if "attn" in batch else None
    ref = logits(cfg, xf, p, torch.tensor(batch["ids"]), stats, batch.get("attn_far", 0), batch.get("attn_rows_from", 0))
    got = torch.tensor(batch["logits"], dtype=torch.float64)
    err = (ref - got).abs().max().item()
    scale = max(ref.abs().max().item(), 1.0)
    ok = err <= 1e-4 * scale
    if stats is not None:   # stretch's per layer and head attention statistics
        want = torch.stack(stats)                                  # (layers, H, 4)
        have = torch.tensor(batch["attn"], dtype=torch.float64)
        serr = ((want - have).abs() / (1e-4 * (1 + want.abs()))).max().item()
        print(f"  attention statistics: max |stretch - torch| / (1e-4 (1 + |torch|)) = {serr:.3f}")
        ok = ok and serr <= 1.0
    # a transform that changed nothing would pass against a plain model too: say how far
    # the plain model is, so a test can require the transform to matter
    plain = logits(cfg, dict(xf, kind="none", window=0, sinks=0, block=0), p, torch.tensor(batch["ids"]))
    moved = (plain - ref).abs().max().item()
    block = [f"{k}={cfg[k]}" for k, dflt in (("norm", "layernorm"), ("ffn", "gelu"), ("bias", True),
             ("qk_norm", "none"), ("attn_scale", "none"), ("out_gate", "none"), ("out_norm", "none"),
             ("kv_shift", "none")) if cfg.get(k, dflt) != dflt]
    if cfg.get("n_kv_heads", -1) not in (-1, 0, None, cfg["n_heads"]):
        block.append(f"kv_heads={cfg['n_kv_heads']}")
    if cfg.get("scaling", {}).get("transform", "none") != "none":
        block.append(f"trained {cfg['scaling']['transform']} s={cfg['scaling']['scale']}")
    print(f"{cfg['pos']} {xf['kind']} s={xf['scale']} sinks={xf['sinks']} window={xf['window']} "
          f"{'block=' + str(xf['block']) + ' ' if xf.get('block', 0) else ''}"
          f"positions={xf.get('positions', 'text')}{' [' + ' '.join(block) + ']' if block else ''}: "
          f"max |stretch - torch| {err:.2e} (scale {scale:.2f}); transform moves logits by {moved:.2e} "
          f"{'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    torch.set_default_dtype(torch.float64)
    bad = 0
    for d in sys.argv[1:]:
        try:
            ok = check(d)
        except Exception:   # a broken case is a failure of that case, the others still run
            traceback.print_exc()
            ok = None
        with open(f"{d}/verdict", "w") as f:   # read by tests/test_transforms.c
            f.write("ok\n" if ok else "mismatch\n" if ok is False else "error\n")
        bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
