#!/usr/bin/env bash
# cli_pos_xpos_cope.sh - the xpos and cope position methods end to end through the real
# binary, on tiny byte-level runs (init_std 0.3: sharp attention, so a wrong position
# path changes the numbers):
#   - train, stop at step 6, --resume to 12: the loss trace equals an uninterrupted run;
#   - eval at 1x and 16x the training length, nonoverlapping and sliding (linear memory):
#     finite perplexities;
#   - generate with the KV cache prints the same text as --no-cache, within the window
#     and, for a one-layer model, past it (--context 12);
#   - export, then a run initialised from the export evaluates like its source;
#   - a sweep over both methods trains, evaluates and reports them.
. "$(dirname "$0")/lib_cli.sh" cli_pos_xpos_cope

METHODS="xpos cope"
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > corpus.txt
cat > cfg.json <<'EOF2'
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "xpos", "init_std": 0.3, "xpos": {"gamma": 16}},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 32, "steps": 12, "eval_every": 12, "eval_batches": 1,
           "log_every": 1, "checkpoint_every": 6, "threads": 1, "schedule": {"warmup": 2}}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }
# evals_ok FILE... : each eval JSON has lengths 32 and 512 with finite losses; with
# SAME=1 the losses of all files agree to 1e-6 (relative)
evals_ok() {
    SAME=${SAME:-0} "$PY" - "$@" <<'EOF3'
import json, math, os, sys
losses = []
for f in sys.argv[1:]:
    d = json.load(open(f))
    rows = d["results"] if "results" in d else d["rows"]
    assert [r["length"] for r in rows] == [32, 512], f
    assert all(math.isfinite(r["loss"]) and 0 < r["loss"] < 10 for r in rows), f
    losses.append([r["loss"] for r in rows])
if os.environ["SAME"] == "1":
    for other in losses[1:]:
        assert all(abs(a - b) <= 1e-6 * abs(a) for a, b in zip(losses[0], other)), losses
EOF3
}

for pos in $METHODS; do
    # ---- train / resume ----
    expect_rc 0 "$pos: train" "$BIN" train cfg.json --out "$pos" --quiet --set model.pos="$pos"
    expect_rc 0 "$pos: train to step 6" "$BIN" train cfg.json --out "$pos-r" --quiet --set model.pos="$pos" --stop-after 6
    expect_rc 0 "$pos: resume" "$BIN" train --resume "$pos-r" --quiet
    [ "$(trace "$pos" | wc -l)" -eq 12 ] && [ "$(trace "$pos")" = "$(trace "$pos-r")" ] && ok ||
        bad "$pos: stopped + resumed loss trace differs from the uninterrupted one"

    # ---- eval at 1x and 16x, both protocols ----
    expect_rc 0 "$pos: eval nonoverlapping" "$BIN" eval "$pos" --lengths 32,512 --json "$pos-n.json" --quiet
    expect_rc 0 "$pos: eval sliding" "$BIN" eval "$pos" --lengths 32,512 --mode sliding --stride 16 --json "$pos-s.json" --quiet
    evals_ok "$pos-n.json" "$pos-s.json" && ok || bad "$pos: eval results"

    # ---- generate: cache == no cache ----
    expect_rc 0 "$pos: train one layer" "$BIN" train cfg.json --out "$pos-1" --quiet --set model.pos="$pos" \
        --set model.n_layers=1 --set train.checkpoint_every=0
    for args in "$pos --prompt the --tokens 40 --seed 7" "$pos-1 --prompt the_quick_brown_fox --tokens 50 --context 12 --seed 9"; do
        # shellcheck disable=SC2086
        expect_rc 0 "$pos: generate $args" "$BIN" generate $args
        cp out.txt cached.txt
        # shellcheck disable=SC2086
        expect_rc 0 "$pos: generate --no-cache $args" "$BIN" generate $args --no-cache
        cmp -s cached.txt out.txt && ok || { bad "$pos: cached and --no-cache text differ ($args)"; diff cached.txt out.txt | head -4; }
    done

    # ---- export / init_from ----
    expect_rc 0 "$pos: export" "$BIN" export "$pos" --out "$pos-exp"
    expect_rc 0 "$pos: train from export" "$BIN" train cfg.json --out "$pos-init" --quiet --set model.pos="$pos" \
        --set train.init_from="$pos-exp/model.safetensors" --set train.optimizer.name=sgd \
        --set train.optimizer.lr=1e-30 --set train.optimizer.weight_decay=0 --set train.steps=1 \
        --set train.eval_every=1 --set train.schedule.warmup=0 --set train.checkpoint_every=0
    expect_rc 0 "$pos: eval init_from run" "$BIN" eval "$pos-init" --lengths 32,512 --json "$pos-i.json" --quiet
    SAME=1 evals_ok "$pos-n.json" "$pos-i.json" && ok || bad "$pos: init_from run does not evaluate like its source"
done

# ---- sweep over the methods ----
grid=$(for pos in $METHODS; do printf '"%s",' "$pos"; done)
cat > sweep.json <<EOF2
{"base": "cfg.json", "set": {"train.steps": 6, "train.checkpoint_every": 0},
 "grid": {"model.pos": [${grid%,}]}, "eval": {"lengths": [32, 512]}, "out": "sw"}
EOF2
expect_rc 0 "sweep" "$BIN" sweep sweep.json --quiet
"$PY" - $METHODS <<'EOF2' && ok || bad "sweep results"
import json, math, sys
res = json.load(open("sw/results.json"))
assert [r["pos"] for r in res["runs"]] == sys.argv[1:], [r["pos"] for r in res["runs"]]
for r in res["runs"]:
    assert r["state"] == "done" and [x["length"] for x in r["results"]] == [32, 512], r["name"]
    assert all(math.isfinite(x["loss"]) for x in r["results"]), r["name"]
EOF2

echo "cli_pos_xpos_cope: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
