#!/usr/bin/python3
"""PyTorch twin of `stretch bench`: the same model, the same step, the same figures.

    /usr/bin/python3 scripts/bench_torch.py --preset S [--steps N] [--warmup N] [--eval 1024]
        [--threads 2] [--json FILE] [--no-train] [--no-eval] [--pos alibi|sinusoidal|none]
        [--precision fp32|bf16]

--precision bf16 is PyTorch's best CPU mode: the forward (and so the backward's matmuls)
under torch.autocast("cpu", dtype=torch.bfloat16), which runs matmuls and linear layers
through oneDNN's bf16 kernels while the weights, gradients, AdamW state and the loss stay
float32 (the counterpart of stretch's train.precision bf16). Its GEMM probe is then a
bf16 x bf16 torch.mm (oneDNN), the MFU denominator, as in `stretch bench --precision bf16`.

Model (as src/model/model.c and scripts/torch_ref.py, in float32): tok_emb -> n_layers x
pre-LN blocks [x += W_o attn(W_qkv LN1 x); x += W_2 gelu_tanh(W_1 LN2 x)] -> LN_f -> logits =
x tok_emb^T (tied), mean cross-entropy. GPT-2 init: N(0, 0.02) matrices and embedding, the
two residual projections N(0, 0.02/sqrt(2 L)), zero biases, unit LN weights. Attention is
the usual eager form: S = QK^T/sqrt(D) + bias (the (H,T,T) ALiBi bias with -inf above the
diagonal, built once per length), softmax, PV. Training step: forward + loss, backward,
clip_grad_norm_(1.0) + AdamW(betas 0.9/0.95, eps 1e-8, wd 0.1 on matrices and the
embedding) + zero_grad(set_to_none=True). Evaluation: torch.no_grad(), forward + loss.

Timing: medians over the timed steps (after warmup), like stretch. Peak RSS per phase:
VmHWM reset through /proc/self/clear_refs before each phase. Writes the JSON schema of
`stretch bench --json` (program "pytorch").

Environment (read by the libraries at import; set it before running): OMP_NUM_THREADS,
OPENBLAS_CORETYPE, OMP_WAIT_POLICY, ATEN_CPU_CAPABILITY.
"""
import argparse, json, math, os, statistics, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import alibi_slopes  # the one transcription of the official slope rule

PRESETS = {
    "tiny": dict(V=512, L=2, d=64, H=4, B=4, T=64, steps=5, warmup=1, eval=[256, 1024]),
    "S": dict(V=33280, L=4, d=256, H=8, B=8, T=256, steps=10, warmup=2, eval=[1024, 4096]),
    "M": dict(V=33280, L=6, d=512, H=8, B=4, T=512, steps=8, warmup=2, eval=[1024, 4096]),
    "G": dict(V=50304, L=12, d=768, H=12, B=4, T=256, steps=6, warmup=2, eval=[1024]),
}




class Block(nn.Module):
    def __init__(self, d, H, std, rstd):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        for lin, s in ((self.qkv, std), (self.out, rstd), (self.fc1, std), (self.fc2, rstd)):
            nn.init.normal_(lin.weight, 0.0, s)
            nn.init.zeros_(lin.bias)

    def forward(self, x, bias):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = [z.view(B, T, H, D).transpose(1, 2) for z in (q, k, v)]
        s = torch.baddbmm(bias.expand(B, H, T, T).reshape(B * H, T, T), q.reshape(B * H, T, D),
                          k.reshape(B * H, T, D).transpose(1, 2), alpha=1.0 / math.sqrt(D))
        a = torch.bmm(torch.softmax(s, dim=-1), v.reshape(B * H, T, D))
        a = a.view(B, H, T, D).transpose(1, 2).reshape(B, T, C)
        x = x + self.out(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w (PyTorch 1.13 has no nn.RMSNorm)"""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.w, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


class LlamaBlock(nn.Module):
    """stretch's --block llama: RMSNorm, SwiGLU (d_ff = 3d), no biases, H/2 key/value heads"""

    def __init__(self, d, H, std, rstd):
        super().__init__()
        self.H, self.Hkv, D = H, H // 2 if H % 2 == 0 else H, d // H
        self.ln1, self.ln2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, (H + 2 * self.Hkv) * D, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.fc1 = nn.Linear(d, 2 * 3 * d, bias=False)
        self.fc2 = nn.Linear(3 * d, d, bias=False)
        for lin, s in ((self.qkv, std), (self.out, rstd), (self.fc1, std), (self.fc2, rstd)):
            nn.init.normal_(lin.weight, 0.0, s)

    def forward(self, x, bias):
        B, T, C = x.shape
        H, Hkv, D = self.H, self.Hkv, C // self.H
        q, k, v = self.qkv(self.ln1(x)).split([H * D, Hkv * D, Hkv * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)
        k, v = [z.view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1) for z in (k, v)]
        s = torch.baddbmm(bias.expand(B, H, T, T).reshape(B * H, T, T), q.reshape(B * H, T, D),
                          k.reshape(B * H, T, D).transpose(1, 2), alpha=1.0 / math.sqrt(D))
        a = torch.bmm(torch.softmax(s, dim=-1), v.reshape(B * H, T, D))
        a = a.view(B, H, T, D).transpose(1, 2).reshape(B, T, C)
        x = x + self.out(a)
        g, u = self.fc1(self.ln2(x)).chunk(2, dim=-1)
        return x + self.fc2(F.silu(g) * u)


class GPT(nn.Module):
    def __init__(self, V, L, d, H, pos, block="gpt2"):
        super().__init__()
        std, rstd = 0.02, 0.02 / math.sqrt(2 * L)
        self.H, self.d, self.pos = H, d, pos
        self.tok_emb = nn.Embedding(V, d)
        nn.init.normal_(self.tok_emb.weight, 0.0, std)
        blk = LlamaBlock if block == "llama" else Block
        self.blocks = nn.ModuleList([blk(d, H, std, rstd) for _ in range(L)])
        self.ln_f = RMSNorm(d) if block == "llama" else nn.LayerNorm(d)
        self.slopes = torch.tensor(alibi_slopes(H), dtype=torch.float32)
        self._cache = {}

    def bias(self, T):
        """(H,T,T) additive bias: -m_h (i - j) for j <= i (ALiBi) or 0, -inf above."""
        if T not in self._cache:
            i = torch.arange(T)[:, None]
            j = torch.arange(T)[None, :]
            d = (i - j).float()
            b = -self.slopes[:, None, None] * d if self.pos == "alibi" else torch.zeros(1, T, T).expand(self.H, T, T)
            self._cache = {T: b.masked_fill(j > i, float("-inf")).contiguous()}
        return self._cache[T]

    def forward(self, ids, targets):
        B, T = ids.shape
        x = self.tok_emb(ids)
        if self.pos == "sinusoidal":
            t = torch.arange(T, dtype=torch.float64)[:, None]
            k = torch.arange(self.d)
            w = 10000.0 ** (-(k - (k % 2)).double() / self.d)
            x = x + torch.where(k % 2 == 0, torch.sin(t * w), torch.cos(t * w)).float()
        bias = self.bias(T)
        for blk in self.blocks:
            x = blk(x, bias)
        logits = self.ln_f(x) @ self.tok_emb.weight.T
        return F.cross_entropy(logits.view(B * T, -1), targets.view(-1))


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class Probe:
    """n^3 GEMM through torch.mm: float32 (PyTorch's BLAS) or bf16 (oneDNN), GFLOPS over
    wall and CPU time."""

    def __init__(self, n, dtype=torch.float32):
        self.n = n
        self.a, self.b = (torch.rand(n, n) - 0.5).to(dtype), (torch.rand(n, n) - 0.5).to(dtype)
        self.out = torch.empty(n, n, dtype=dtype)
        self.flops = 2.0 * n ** 3
        torch.mm(self.a, self.b, out=self.out)

    def run(self):
        c0, t0 = time.process_time(), time.perf_counter()
        torch.mm(self.a, self.b, out=self.out)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        return self.flops / dt * 1e-9, (self.flops / dc * 1e-9 if dc > 0 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="S", choices=sorted(PRESETS))
    for k in ("vocab", "layers", "d", "heads", "batch", "seq", "steps", "warmup"):
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--pos", default="alibi", choices=["alibi", "sinusoidal", "none"])
    ap.add_argument("--block", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--eval", default=None, help="L1,L2,... or none")
    ap.add_argument("--eval-batch", type=int, default=1)
    ap.add_argument("--eval-reps", type=int, default=2)
    ap.add_argument("--sgemm", type=int, default=2048)
    ap.add_argument("--sgemm-reps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--foreach", type=int, default=1, help="AdamW foreach implementation (1) or the loop (0)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="bf16: torch.autocast('cpu', dtype=torch.bfloat16) around the forward")
    a = ap.parse_args()
    bf16 = a.precision == "bf16"
    # autocast for the forward (and the loss); the backward follows the recorded dtypes
    amp = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else (lambda: torch.autocast("cpu", enabled=False))

    p = dict(PRESETS[a.preset])
    for k, key in (("vocab", "V"), ("layers", "L"), ("d", "d"), ("heads", "H"), ("batch", "B"),
                   ("seq", "T"), ("steps", "steps"), ("warmup", "warmup")):
        if getattr(a, k) is not None:
            p[key] = getattr(a, k)
    if a.eval is not None:
        p["eval"] = [] if a.eval == "none" else [int(x) for x in a.eval.split(",")]
    if a.no_train:
        p["steps"] = 0
    if a.no_eval:
        p["eval"] = []
    threads = a.threads or os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    V, L, d, H, B, T = p["V"], p["L"], p["d"], p["H"], p["B"], p["T"]

    res = {"program": "pytorch", "version": torch.__version__, "preset": a.preset,
           "config": {"vocab_size": V, "n_layers": L, "d_model": d, "n_heads": H, "d_ff": 3 * d if a.block == "llama" else 4 * d,
                      "pos": a.pos, "block": a.block, "B": B, "T": T, "steps": p["steps"], "warmup": p["warmup"],
                      "lr": 3e-4, "clip_norm": 1.0, "eval_B": a.eval_batch, "eval_reps": a.eval_reps,
                      "seed": a.seed, "precision": a.precision},
           "env": {"blas_core": os.environ.get("OPENBLAS_CORETYPE", ""),
                   "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                   "blas_threads": threads, "omp_threads": torch.get_num_threads(),
                   "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                   "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", ""),
                   "parallel_info": torch.__config__.parallel_info().splitlines()[0:6]}}
    log = lambda *x: print("[bench_torch]", *x, file=sys.stderr, flush=True)
    probe, sg = None, {"n": a.sgemm, "reps": a.sgemm_reps, "precision": a.precision,
                       "impl": "torch.mm " + ("bf16 (oneDNN)" if bf16 else "float32 (BLAS)"),
                       "gflops_best": 0.0, "gflops_median": 0.0, "gflops_interleaved": 0.0, "gflops_per_cpu_s": 0.0}
    res["sgemm"] = sg
    if a.sgemm_reps > 0:
        probe = Probe(a.sgemm, torch.bfloat16 if bf16 else torch.float32)
        runs = [probe.run() for _ in range(a.sgemm_reps)]
        sg["gflops_best"] = max(w for w, c in runs)
        sg["gflops_median"] = statistics.median(w for w, c in runs)
        sg["gflops_per_cpu_s"] = max(c for w, c in runs)
        log(f"{a.precision} GEMM {a.sgemm}^3: best {sg['gflops_best']:.1f} GFLOPS, median {sg['gflops_median']:.1f}")
    model = GPT(V, L, d, H, a.pos, a.block)
    n_params = sum(t.numel() for t in model.parameters())
    fpt = 6.0 * n_params + 6.0 * L * T * d
    res["n_params"], res["flops_per_token"] = n_params, fpt
    g = torch.Generator().manual_seed(a.seed + 1)

    res["train"] = None
    if p["steps"] > 0:
        decay = [t for n, t in model.named_parameters() if t.dim() == 2]
        no_decay = [t for n, t in model.named_parameters() if t.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=bool(a.foreach))
        ids = torch.randint(0, V, (B, T), generator=g)
        tg = torch.randint(0, V, (B, T), generator=g)
        model.train()
        reset_peak_rss()
        tf, tb, to, ts, tc, tg_rates, losses = [], [], [], [], [], [], []
        warm = max(1, p["warmup"])
        for s in range(warm + p["steps"]):
            c0, t0 = time.process_time(), time.perf_counter()
            with amp():
                loss = model(ids, tg)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            t3, c3 = time.perf_counter(), time.process_time()
            losses.append(loss.item())
            if s >= warm:
                tf.append(t1 - t0); tb.append(t2 - t1); to.append(t3 - t2); ts.append(t3 - t0)
                tc.append(c3 - c0)
                if probe:   # the BLAS limit under the load the step just saw
                    w, c = probe.run()
                    tg_rates.append(w)
                    sg["gflops_best"] = max(sg["gflops_best"], w)
                    sg["gflops_per_cpu_s"] = max(sg["gflops_per_cpu_s"], c)
        step = statistics.median(ts)
        cpu = statistics.median(tc)
        tps = B * T / step
        if tg_rates:
            sg["gflops_interleaved"] = statistics.median(tg_rates)
        fl = fpt * B * T
        ratio = lambda num, den: num / den if den else 0.0
        res["train"] = {"forward_s": statistics.median(tf), "backward_s": statistics.median(tb),
                        "optim_s": statistics.median(to), "step_s": step,
                        "step_mean_s": sum(ts) / len(ts), "step_cpu_s": cpu, "tokens_per_s": tps,
                        "mfu": ratio(fl / step, sg["gflops_best"] * 1e9),
                        "mfu_interleaved": ratio(fl / step, sg["gflops_interleaved"] * 1e9),
                        "cpu_efficiency": ratio(fl / cpu, sg["gflops_per_cpu_s"] * 1e9),
                        "peak_rss_bytes": peak_rss(), "loss_first": losses[0], "loss_last": losses[-1]}
        log(f"train B={B} T={T}: {step:.3f} s/step, {cpu:.3f} CPU s/step, {tps:.0f} tokens/s, peak RSS {peak_rss() / 2**20:.0f} MiB")
        del opt, ids, tg, loss
        for t in model.parameters():
            t.grad = None

    probe = None   # freed before the evaluation's memory figures, as in stretch
    res["eval"] = []
    model.eval()
    with torch.no_grad():
        for Lv in p["eval"]:
            ids = torch.randint(0, V, (a.eval_batch, Lv), generator=g)
            tg = torch.randint(0, V, (a.eval_batch, Lv), generator=g)
            reset_peak_rss()
            with amp():
                model(ids, tg)
            ts = []
            for _ in range(max(1, a.eval_reps)):
                t0 = time.perf_counter()
                with amp():
                    loss = model(ids, tg)
                ts.append(time.perf_counter() - t0)
            sec = statistics.median(ts)
            res["eval"].append({"L": Lv, "B": a.eval_batch, "seconds": sec,
                                "tokens_per_s": a.eval_batch * Lv / sec, "peak_rss_bytes": peak_rss(),
                                "loss": loss.item()})
            log(f"eval L={Lv}: {sec:.3f} s, {a.eval_batch * Lv / sec:.0f} tokens/s, peak RSS {peak_rss() / 2**20:.0f} MiB")
            model._cache = {}

    if res["train"]:
        t = res["train"]
        print(f"pytorch {torch.__version__} preset {a.preset} {a.precision}: params {n_params / 1e6:.2f}M, "
              f"step {t['step_s']:.4f} s (fwd {t['forward_s']:.4f} bwd {t['backward_s']:.4f} opt {t['optim_s']:.4f}), "
              f"{t['tokens_per_s']:.0f} tokens/s, MFU {100 * t['mfu']:.1f}% ({100 * t['mfu_interleaved']:.1f}% vs interleaved GEMM, "
              f"{100 * t['cpu_efficiency']:.1f}% per CPU-second), peak RSS {t['peak_rss_bytes'] / 2**20:.0f} MiB")
    for e in res["eval"]:
        print(f"  eval L={e['L']} B={e['B']}: {e['tokens_per_s']:.0f} tokens/s, peak RSS {e['peak_rss_bytes'] / 2**20:.0f} MiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
