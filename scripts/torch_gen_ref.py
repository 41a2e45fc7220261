#!/usr/bin/python3
"""Replays `stretch generate --temperature 0` (greedy decoding) of a byte-level run in PyTorch.

Usage (called by tests/cli_torch_generate.sh):
    /usr/bin/python3 scripts/torch_gen_ref.py EXPORT_DIR PROMPT TOKENS CONTEXT MODE OUTPUT
EXPORT_DIR is `stretch export` of a byte-level run (token = byte); OUTPUT what generate
printed (the prompt, then TOKENS bytes). MODE says how README.md ("generate") defines the
logits once the text is longer than CONTEXT:
  window  the KV cache of a relative method, rope or xpos: every layer attends to its last
          CONTEXT keys (sliding-window attention over the whole text, absolute positions);
  rerun   --no-cache, and the cache of sinusoidal, learned and fire positions: a fresh
          forward over the last CONTEXT tokens;
  sinks:K:W:text|cache  the cache of --sinks K --window W (--positions text|cache): the
          text's first K tokens and its last W whatever its length, CONTEXT not bounding
          it; the logits of the whole text under that mask, the sinks at their text
          positions or at cache positions (scripts/torch_ref_transforms.py's model);
  blockwise:B  the cache of --blockwise B: blocks of B counted from the text's first
          token, each query seeing its own block and the previous one, CONTEXT not
          bounding it; the logits of the whole text under that mask.
(While the text fits CONTEXT window and rerun are the full forward.) Each step takes the argmax of
the float64 model of scripts/torch_ref.py and compares it with stretch's byte; the replay
then continues from stretch's byte. A step whose top two logits are within 1e-4 here
(float32 may pick either) ends the comparison there, said so. Exits 1 on a mismatch.
"""
import json, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  (the independent model)
import torch_ref_transforms  # noqa: E402  (the same model with sinks + window)

TIE = 1e-4


def main():
    torch.set_default_dtype(torch.float64)
    if len(sys.argv) != 7:
        sys.exit("usage: torch_gen_ref.py EXPORT_DIR PROMPT TOKENS CONTEXT "
                 "window|rerun|sinks:K:W:POSITIONS|blockwise:B OUTPUT")
    exp, prompt, n, ctx, mode, out_path = sys.argv[1:]
    n, ctx = int(n), int(ctx)
    cfg = json.load(open(f"{exp}/config.json"))["model"]
    p = torch_ref.load_safetensors(f"{exp}/model.safetensors")
    ids = list(prompt.encode())
    out = open(out_path, "rb").read()
    if out[:len(ids)] != bytes(ids) or len(out) < len(ids) + n:
        print(f"  MISMATCH: the output does not start with the prompt and {n} more bytes ({len(out)} bytes)")
        sys.exit(1)
    got = list(out[len(ids):len(ids) + n])
    xf = None
    if mode.startswith("sinks:"):
        _, k, w, where = mode.split(":")
        xf = {"kind": "none", "scale": 0.0, "sinks": int(k), "window": int(w), "positions": where, "clip": 0,
              "train_len": 0, "n": 0}
    elif mode.startswith("blockwise:"):
        xf = {"kind": "none", "scale": 0.0, "sinks": 0, "window": 0, "block": int(mode.split(":")[1]), "clip": 0,
              "train_len": 0, "n": 0}
    # the most keys a query sees: past it, the mask (not the context) bounds the text
    keys = (xf["sinks"] + xf["window"] if xf["window"] else 2 * xf["block"]) if xf else ctx
    checked, past = 0, 0
    with torch.no_grad():
        for step, s in enumerate(got):
            if xf:
                z = torch_ref_transforms.logits(cfg, xf, p, torch.tensor(ids)[None])[0, -1]
            else:
                c, x = (dict(cfg, _window=ctx), ids) if mode == "window" else (cfg, ids[-ctx:])
                z = torch_ref.logits(c, p, torch.tensor(x)[None])[0, -1]
            top = z.topk(2).values
            a = int(z.argmax())
            if a != s:
                if top[0] - top[1] < TIE:
                    print(f"  step {step}: a near tie ({float(top[0] - top[1]):.1e}), stretch {s} here {a}: "
                          f"compared up to it")
                    break
                print(f"  MISMATCH at step {step} ({len(ids)} tokens of text): stretch {s} ({bytes([s])!r}), "
                      f"argmax {a} ({bytes([a])!r}), margin {float(top[0] - top[1]):.2e}")
                sys.exit(1)
            checked += 1
            past += len(ids) + 1 > keys
            ids.append(s)
    bound = (f"the sinks + window of {keys}" if xf["window"] else f"two blocks of {keys}") if xf \
        else f"the context of {ctx}"
    print(f"  {mode}: {checked} of {n} greedy tokens equal ({past} of them past {bound}): "
          f"{bytes(got[:40])!r}...")
    sys.exit(0)


if __name__ == "__main__":
    main()
