#!/usr/bin/python3
"""Recomputes `stretch eval` reports in PyTorch from the documented protocols.

Usage (called by tests/cli_torch_eval.sh):
    /usr/bin/python3 scripts/torch_eval_ref.py EXPORT_DIR TEXT_FILE REPORT.json [REPORT.json ...]
EXPORT_DIR is `stretch export` of a byte-level run (config.json, model.safetensors);
TEXT_FILE the file each report evaluated with `--data` (the byte tokenizer: token = byte).
For every row of every report the windows are rebuilt here from docs/evaluation.md ("What
is scored", "Per-position buckets"), run through scripts/torch_ref.py's float64 model and
compared with the row:
  - nonoverlapping: windows at 0, L, 2L, ..., the last clipped to the stream, each scoring
    all its positions; sliding with stride S: windows at 0, S, 2S, ..., clipped, stopping
    once one reaches the end, window 0 scoring all positions and the others p >= L - S;
    L past the stream: one window of n - 1 inputs; --max-tokens cuts the stream first;
  - windows, scored tokens and forward tokens exactly; nll, loss and bpb (= loss / ln 2 for
    bytes) to 1e-6 relative (stretch's forward is float32);
  - per-position buckets: linear (position p in floor(p N / L)) or log2 ({0}, [1, 2), [2,
    4), ..., [2^(k-1), L)): bounds and token counts exactly, nll to 1e-6 relative;
  - a report's inference-time transform (its "transform" object: --transform, --scale,
    --sinks, --window, --positions) runs in every window through the float64 model of
    scripts/torch_ref_transforms.py, with the scale docs/evaluation.md gives: the --scale
    given, else max(1, L / train_len) for the row's length L ("n/L"; the row's
    transform_scale must say the same), and dynamic NTK's max(1, T / train_len) for each
    window's own length T (the clipped last one included).
Prints one line per row; exits 1 on any mismatch.
"""
import json, math, os, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  (the independent model)
import torch_ref_transforms  # noqa: E402  (the same model under the inference-time transforms)

RTOL = 1e-6


def windows(n, L, S, mode):
    """(start, len, score_from) of the windows over a stream of n tokens (n - 1 targets)"""
    if mode == "nonoverlapping":
        S = L
    out, start = [], 0
    while start < n - 1:
        ln = min(L, n - 1 - start)
        out.append((start, ln, 0 if start == 0 else L - S))
        if start + ln >= n - 1:
            break
        start += S
    return out


def bucket_bounds(L, N, scale):
    if scale == "log2":
        b, lo = [(0, 1)], 1
        while lo < L:
            hi = min(2 * lo, L)
            b.append((lo, hi))
            lo = hi
        return b
    N = min(N, L)
    return [(-(-k * L // N), -(-(k + 1) * L // N)) for k in range(N)]


def transform_of(t, L):
    """the report's transform object as torch_ref_transforms takes it, for rows of length
    L; None without one"""
    if not t:
        return None
    sc = t["scale"]
    return {"kind": t["name"], "scale": sc if isinstance(sc, (int, float)) else 0.0,
            "sinks": t.get("sinks", 0), "window": t.get("window", 0), "positions": t.get("positions", "text"),
            "clip": t.get("clip", 0), "block": t.get("blockwise", 0), "train_len": t["train_len"], "n": L}


def check_row(cfg, p, ids, row, mode, scale, t=None):
    L, S = row["length"], row["stride"]
    n = len(ids)
    xf = transform_of(t, L)
    wins = windows(n, L, S, mode)
    bounds = bucket_bounds(L, len(row["buckets"]), scale) if row.get("buckets") else []
    b_tok = [0] * len(bounds)
    b_nll = [0.0] * len(bounds)
    nll, tokens, fwd = 0.0, 0, 0
    stream = torch.tensor(ids)
    with torch.no_grad():
        for start, ln, sf in wins:
            x = stream[start:start + ln][None]
            y = stream[start + 1:start + ln + 1]
            z = (torch_ref_transforms.logits(cfg, xf, p, x) if xf else torch_ref.logits(cfg, p, x))[0]
            tok_nll = F.cross_entropy(z, y, reduction="none")[sf:]
            nll += tok_nll.sum().item()
            tokens += ln - sf
            fwd += ln
            for k, (lo, hi) in enumerate(bounds):
                a, b = max(lo, sf), min(hi, ln)
                if a < b:
                    b_tok[k] += b - a
                    b_nll[k] += tok_nll[a - sf:b - sf].sum().item()
    loss = nll / tokens
    bad = []
    for key, want in (("windows", len(wins)), ("tokens", tokens), ("forward_tokens", fwd)):
        if row[key] != want:
            bad.append(f"{key} {row[key]} vs {want}")
    for key, want in (("nll", nll), ("loss", loss), ("bpb", loss / math.log(2))):
        if not abs(row[key] - want) <= RTOL * abs(want):
            bad.append(f"{key} {row[key]:.10g} vs {want:.10g}")
    for k, (lo, hi) in enumerate(bounds):
        rb = row["buckets"][k]
        if (rb["lo"], rb["hi"], rb["tokens"]) != (lo, hi, b_tok[k]):
            bad.append(f"bucket {k}: [{rb['lo']}, {rb['hi']}) {rb['tokens']} tokens vs [{lo}, {hi}) {b_tok[k]}")
        elif not abs(rb["nll"] - b_nll[k]) <= RTOL * max(abs(b_nll[k]), 1e-300):
            bad.append(f"bucket {k} nll {rb['nll']:.10g} vs {b_nll[k]:.10g}")
    if len(row.get("buckets", [])) != len(bounds):
        bad.append(f"{len(row.get('buckets', []))} buckets vs {len(bounds)}")
    if xf and xf["kind"] not in ("none", "dynamic_ntk", "rerope"):   # the scale the row says it used
        want = torch_ref_transforms.scale_of(xf, L)
        if not abs(row.get("transform_scale", -1) - want) <= 1e-12 * want:
            bad.append(f"transform_scale {row.get('transform_scale')} vs {want}")
    label = f" [{t['label']}]" if t else ""
    print(f"  L={L} {mode} S={S}{label}: {len(wins)} windows, {tokens} targets, loss torch {loss:.8f} stretch "
          f"{row['loss']:.8f}, {len(bounds)} buckets: " + ("ok" if not bad else "MISMATCH " + "; ".join(bad)))
    return not bad


def main():
    torch.set_default_dtype(torch.float64)
    if len(sys.argv) < 4:
        sys.exit("usage: torch_eval_ref.py EXPORT_DIR TEXT_FILE REPORT.json [REPORT.json ...]")
    exp, text = sys.argv[1], sys.argv[2]
    cfg = json.load(open(f"{exp}/config.json"))["model"]
    p = torch_ref.load_safetensors(f"{exp}/model.safetensors")
    data = list(open(text, "rb").read())
    ok = True
    for rep_path in sys.argv[3:]:
        rep = json.load(open(rep_path))
        ids = data[:rep["split_tokens"]]   # --max-tokens: the stream's first tokens
        print(f"[{os.path.basename(rep_path)}: {rep['mode']}, {len(ids)} of {len(data)} tokens]")
        for row in rep["results"]:
            ok &= check_row(cfg, p, ids, row, rep["mode"], rep.get("bucket_scale", "linear"), rep.get("transform"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
