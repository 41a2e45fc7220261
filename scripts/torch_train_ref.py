#!/usr/bin/python3
"""Replays stretch training runs in PyTorch and compares them, update by update.

Usage (called by tests/test_pytorch_train.c):
    /usr/bin/python3 scripts/torch_train_ref.py DIR [DIR ...]
Each DIR holds a finished stretch run (DIR/run: its config.json and metrics.jsonl, log_every
1), the initial weights it started from (init.safetensors, its train.init_from), the
weights it ended with (final.safetensors), the batches of every update (batches.json:
{"steps": [[{"ids", "targets"} per micro-batch] per update]}) and label.txt.

The model is scripts/torch_ref.py's float64 transcription of the documented math. The
training is written from configs/README.md with PyTorch's own pieces:
  - the update's loss is the mean of its micro-batches' mean losses (gradients accumulate
    over train.grad_accum micro-batches, each scaled by 1/grad_accum);
  - torch.nn.utils.clip_grad_norm_(params, clip_norm) when clip_norm > 0 (the norm before
    clipping is the logged grad_norm);
  - AdamW: torch.optim.AdamW (decoupled decay p *= 1 - lr wd, bias-corrected moments, eps
    outside the square root); SGD: torch.optim.SGD with momentum (buf = momentum buf + g)
    and the decoupled decay p *= 1 - lr wd applied first (torch's own SGD weight_decay is
    an L2 term in the gradient, not what stretch documents);
  - the learning rate of update s (1-based) from the schedule formulas of configs/README.md;
  - weight-decay groups from the documented names: 1-d `*.bias` ("bias"), norm gains
    `ln*.weight` / `*_norm.weight` ("norm"), `tok_emb` / `pos_emb` / `abacus_emb` ("embedding"); outside
    the groups the matrices (`*.weight`) and FIRE's `w1`, `w2` decay and every other
    position-method parameter never does (docs/position-methods.md).
Writes DIR/verdict ("ok" or "mismatch") and exits 1 on any mismatch.
"""
import json, math, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  (the independent model)

# stretch trains in float32 against this float64 replay; the differences grow with the
# updates (Adam divides by sqrt(v), so a gradient element near zero moves by up to lr
# whichever its rounding), so weights are compared relative to the step size.
LOSS_RTOL = 1e-6
NORM_RTOL = 1e-5
LR_RTOL = 1.2e-7      # the logged rate is the float the optimizer received (2^-23 relative)
WEIGHT_TOL_LR = 0.005   # max |w_stretch - w_torch| <= this x (sum of the run's learning rates)


def lr_at(t, s):
    """configs/README.md, "Learning-rate schedules": update s counts from 1, warmup w"""
    sc, lr = t["schedule"], t["optimizer"]["lr"]
    kind, w, steps = sc["kind"], sc["warmup"], t["steps"]
    lr_min = sc.get("min_lr_ratio", 0.1) * lr
    if kind == "inv_sqrt":
        return lr * min(s / w, math.sqrt(w / s))
    if w > 0 and s <= w:
        return lr * s / w
    if kind == "constant":
        return lr
    if kind == "wsd":
        D = round(sc["decay_frac"] * steps)   # Python rounds half to even; decay_frac x steps here is not a half
        start = steps - D
        return lr if s <= start else lr - (lr - lr_min) * min((s - start) / D, 1.0)
    p = min((s - w) / (steps - w), 1.0) if steps > w else 1.0
    if kind == "cosine":
        return lr_min + (lr - lr_min) * (1 + math.cos(math.pi * p)) / 2
    return lr - (lr - lr_min) * p   # linear


def decays(name, shape, no_decay):
    last = name.rsplit(".", 1)[-1]
    comp = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
    if last == "bias" and len(shape) == 1:
        return "bias" not in no_decay
    if last == "weight" and (comp.startswith("ln") or comp.endswith("_norm")):
        return "norm" not in no_decay
    if name.startswith("tok_emb") or name.startswith("pos_emb") or name.startswith("abacus_emb"):
        return "embedding" not in no_decay
    return last == "weight" or (".fire." in name and last in ("w1", "w2"))


def replay(d):
    cfg = json.load(open(f"{d}/run/config.json"))
    model, t = cfg["model"], cfg["train"]
    opt_cfg = t["optimizer"]
    p = torch_ref.load_safetensors(f"{d}/init.safetensors")
    init = {k: v.clone() for k, v in p.items()}
    final = torch_ref.load_safetensors(f"{d}/final.safetensors")
    steps = json.load(open(f"{d}/batches.json"))["steps"]
    logged = [json.loads(l) for l in open(f"{d}/run/metrics.jsonl") if '"loss"' in l]
    assert len(steps) == t["steps"] == len(logged), (len(steps), t["steps"], len(logged))
    for v in p.values():
        v.requires_grad_(True)
    no_decay = opt_cfg.get("no_decay", ["bias", "norm"])
    dec = [v for k, v in p.items() if decays(k, v.shape, no_decay)]
    keep = [v for k, v in p.items() if not decays(k, v.shape, no_decay)]
    wd = opt_cfg.get("weight_decay", 0.01)
    if opt_cfg.get("name", "adamw") == "adamw":
        groups = [{"params": dec, "weight_decay": wd}, {"params": keep, "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=opt_cfg["lr"], betas=(opt_cfg.get("beta1", 0.9), opt_cfg.get("beta2", 0.98)),
                                eps=opt_cfg.get("eps", 1e-8))
        decoupled = None
    else:
        opt = torch.optim.SGD(list(p.values()), lr=opt_cfg["lr"], momentum=opt_cfg.get("momentum", 0.0))
        decoupled = (dec, wd)
    ok, worst = True, {"loss": 0.0, "grad_norm": 0.0, "lr": 0.0}
    lr_sum = 0.0
    clip = t.get("clip_norm", 1.0)
    for s, micro in enumerate(steps, start=1):
        opt.zero_grad(set_to_none=False)
        loss_sum = 0.0
        for mb in micro:
            loss = torch_ref.forward(model, p, torch.tensor(mb["ids"]), torch.tensor(mb["targets"]))
            (loss / len(micro)).backward()
            loss_sum += loss.item()
        loss = loss_sum / len(micro)
        params = list(p.values())
        if clip > 0:
            gnorm = torch.nn.utils.clip_grad_norm_(params, clip).item()
        else:
            gnorm = torch.sqrt(sum((v.grad * v.grad).sum() for v in params)).item()
        lr = lr_at(t, s)
        lr_sum += lr
        for g in opt.param_groups:
            g["lr"] = lr
        if decoupled:
            with torch.no_grad():
                for v in decoupled[0]:
                    v.mul_(1 - lr * decoupled[1])
        opt.step()
        rec = logged[s - 1]
        errs = {"loss": abs(rec["loss"] - loss) / max(1.0, abs(loss)),
                "grad_norm": abs(rec["grad_norm"] - gnorm) / max(gnorm, 1e-12),
                "lr": abs(rec["lr"] - lr) / lr if lr > 0 else (0.0 if rec["lr"] == 0 else math.inf)}
        tol = {"loss": LOSS_RTOL, "grad_norm": NORM_RTOL, "lr": LR_RTOL}
        bad = [k for k in errs if not errs[k] <= tol[k]]
        for k in errs:
            worst[k] = max(worst[k], errs[k])
        if bad or rec["step"] != s:
            ok = False
            print(f"  update {s} (stretch's record: step {rec['step']}): " +
                  ", ".join(f"{k} stretch {rec[k]:.9g} torch {v:.9g}" for k, v in
                            (("loss", loss), ("grad_norm", gnorm), ("lr", lr)) if k in bad) + " MISMATCH")
    print(f"  {len(steps)} updates: worst relative |diff| loss {worst['loss']:.1e}, grad norm "
          f"{worst['grad_norm']:.1e}, lr {worst['lr']:.1e}")
    tol_w = WEIGHT_TOL_LR * lr_sum
    wmax, wname, moved = 0.0, "", 0.0
    for k, v in p.items():
        e = (v.detach() - final[k]).abs().max().item()
        if not e <= wmax:
            wmax, wname = e, k
        moved = max(moved, (v.detach() - init[k]).abs().max().item())
    good = wmax <= tol_w
    ok &= good
    print(f"  final weights: {len(p)} tensors, moved up to {moved:.2e} in training; worst max |diff| {wmax:.2e} "
          f"({wname}), tolerance {tol_w:.2e} "
          f"{'ok' if good else 'MISMATCH'}")
    return ok


def main():
    torch_ref.run_cases(replay, "torch_train_ref.py")


if __name__ == "__main__":
    main()
