#!/usr/bin/python3
"""Recomputes `stretch eval --task --show N` in PyTorch from the printed instances.

Usage (called by tests/cli_torch_task.sh):
    /usr/bin/python3 scripts/torch_task_ref.py EXPORT_DIR SHOW.txt REPORT.json
EXPORT_DIR is `stretch export` of a task run; SHOW.txt the stdout of `stretch eval RUN
--task --trials N --show N --json REPORT.json` (every instance printed). Each instance line
(docs/tasks.md, "--show") is turned back into token ids with the documented vocabulary
(11 specials, the digits at 11..20, symbols a, b, ... from 21) and the sequence the
evaluation scores: the prompt with each `[?]` replaced by the next expected answer token,
then the remaining answer tokens. The float64 model of scripts/torch_ref.py runs it whole
(no KV cache: stretch's evaluation prefills and decodes through its cache) and, at every
answer token, takes the argmax of the logits before it (ties to the lowest id) and -log p.
Checked against stretch: each instance's argmax tokens, the first wrong one (`*`), the
verdict and its k/n count; each (size, depth) cell's accuracy, token accuracy and answer
loss in the report (the loss to 1e-5 relative). An argmax whose top two logits are within
1e-4 here may go either way in float32 and is not held against stretch.
Exits 1 on any mismatch.
"""
import json, math, os, re, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  (the independent model)

SPECIALS = ["<pad>", "=", ".", "+", "|", "?", "_", "W", "I", "R", "K"]
TIE = 1e-4
LOSS_RTOL = 1e-5


def symbol_name(k):
    """a..z, then aa, ab, ... (docs/tasks.md)"""
    s = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        s = chr(97 + r) + s
    return s


def vocabulary(n_symbols):
    ids = {name: i for i, name in enumerate(SPECIALS)}
    ids.update({str(d): 11 + d for d in range(10)})
    ids.update({symbol_name(k): 21 + k for k in range(n_symbols)})
    return ids


LINE = re.compile(r"^size (\d+) trial (\d+): (?:\(depth ([0-9.e+-]+)\) )?(.*)$")


def parse(line, vocab):
    m = LINE.match(line)
    if not m:
        return None
    parts = m.group(4).split("  | ")
    prompt, expected, model, verdict = parts[0].split(), parts[1].split()[1:], parts[2].split()[1:], parts[3]
    assert parts[1].startswith("expected") and parts[2].startswith("model"), line
    star = model.index("*") if "*" in model else -1
    model = [t for t in model if t != "*"]
    seq, answer_at, k = [], [], 0
    for t in prompt:
        if t == "[?]":
            answer_at.append(len(seq))
            seq.append(vocab[expected[k]])
            k += 1
        else:
            seq.append(vocab[t])
    for t in expected[k:]:
        answer_at.append(len(seq))
        seq.append(vocab[t])
    vm = re.match(r"(exact|wrong) \((\d+)/(\d+) answer tokens\)", verdict.strip())
    depth = None if m.group(3) is None else float(m.group(3))
    return {"cell": (int(m.group(1)), depth), "seq": seq, "answer_at": answer_at,
            "expected": [vocab[t] for t in expected], "model": [vocab[t] for t in model], "star": star,
            "exact": vm.group(1) == "exact", "right": int(vm.group(2)), "n": int(vm.group(3)), "text": line}


def score(cfg, p, inst):
    """argmax ids, near-tie flags and -log p at the answer positions"""
    x = torch.tensor(inst["seq"][:-1])[None]
    with torch.no_grad():
        z = torch_ref.logits(cfg, p, x)[0]
    rows = z[[a - 1 for a in inst["answer_at"]]]
    top2 = rows.topk(2, dim=-1).values
    nll = -F.log_softmax(rows, dim=-1)[range(len(rows)), inst["expected"]]
    return rows.argmax(-1).tolist(), (top2[:, 0] - top2[:, 1] < TIE).tolist(), nll.tolist()


def check_instance(cfg, p, inst):
    arg, tie, nll = score(cfg, p, inst)
    bad = []
    for i, (a, s) in enumerate(zip(arg, inst["model"])):
        if a != s and not tie[i]:
            bad.append(f"answer token {i}: argmax {a}, stretch {s}")
    exp = inst["expected"]
    right = sum(a == e for a, e in zip(inst["model"], exp))
    first = next((i for i, (a, e) in enumerate(zip(inst["model"], exp)) if a != e), -1)
    if len(inst["model"]) != len(exp) or inst["n"] != len(exp) or inst["right"] != right:
        bad.append(f"{inst['right']}/{inst['n']} answer tokens printed, {right}/{len(exp)} in its tokens")
    if inst["star"] != first or inst["exact"] != (first < 0):
        bad.append(f"* at {inst['star']} and {'exact' if inst['exact'] else 'wrong'}, first wrong token {first}")
    return bad, sum(nll), any(tie)


def main():
    torch.set_default_dtype(torch.float64)
    if len(sys.argv) != 4:
        sys.exit("usage: torch_task_ref.py EXPORT_DIR SHOW.txt REPORT.json")
    exp, show, rep_path = sys.argv[1:]
    full = json.load(open(f"{exp}/config.json"))
    cfg = full["model"]
    p = torch_ref.load_safetensors(f"{exp}/model.safetensors")
    vocab = vocabulary(full["data"]["task"]["symbols"])
    cells = {}
    ok, n_inst = True, 0
    for line in open(show):
        inst = parse(line.rstrip("\n"), vocab)
        if inst is None:
            continue
        n_inst += 1
        bad, nll, tie = check_instance(cfg, p, inst)
        c = cells.setdefault(inst["cell"], {"n": 0, "exact": 0, "right": 0, "tokens": 0, "nll": 0.0, "tie": False})
        c["n"] += 1
        c["exact"] += inst["exact"]
        c["right"] += inst["right"]
        c["tokens"] += inst["n"]
        c["nll"] += nll
        c["tie"] |= tie
        if bad:
            ok = False
            print(f"  MISMATCH {inst['text']}\n    " + "; ".join(bad))
    rows = json.load(open(rep_path))["results"]
    for r in rows:
        c = cells.pop((r["size"], r.get("depth")), None)
        if c is None:
            ok = False
            print(f"  MISMATCH report row size {r['size']} depth {r.get('depth')}: no instance printed")
            continue
        loss = c["nll"] / c["tokens"]
        bad = []
        if r["trials"] != c["n"]:
            bad.append(f"{r['trials']} trials, {c['n']} instances printed")
        if abs(r["accuracy"] - c["exact"] / c["n"]) > 1e-12 or abs(r["token_accuracy"] - c["right"] / c["tokens"]) > 1e-12:
            bad.append(f"accuracy {r['accuracy']} / {r['token_accuracy']} vs the lines' {c['exact']}/{c['n']}, "
                       f"{c['right']}/{c['tokens']}")
        if not abs(r["answer_loss"] - loss) <= LOSS_RTOL * loss:
            bad.append(f"answer loss {r['answer_loss']:.9g} vs {loss:.9g}")
        ok &= not bad
        print(f"  size {r['size']}" + (f" depth {r['depth']:g}" if r.get("depth") is not None else "") +
              f": accuracy {r['accuracy']:.3f}, token accuracy {r['token_accuracy']:.3f}, answer loss torch "
              f"{loss:.6f} stretch {r['answer_loss']:.6f}" + (" (a near tie)" if c["tie"] else "") +
              (": ok" if not bad else ": MISMATCH " + "; ".join(bad)))
    for key in cells:
        ok = False
        print(f"  MISMATCH instances of size {key[0]} depth {key[1]} printed but no report row")
    print(f"  {n_inst} instances, {len(rows)} cells: {'ok' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
