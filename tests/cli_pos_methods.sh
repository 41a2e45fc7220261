#!/usr/bin/env bash
# cli_pos_methods.sh - the position methods added through the registry (sandwich, fire,
# kerple power), ALiBi on some heads (model.alibi_heads) and log-n attention scaling
# (logn, learned_logn), end to end on tiny
# synthetic runs: train, stop and --resume bit-identical to an uninterrupted run, eval at
# 16x the training length nonoverlapping and sliding (finite, every target scored),
# export and a run initialised from the export evaluating exactly like its source, and a
# sweep over two of them labelled by method; alibi_heads's label and its errors.
. "$(dirname "$0")/lib_cli.sh" cli_pos_methods

cat > cfg.json <<'EOF2'
{"model": {"n_layers": 2, "d_model": 16, "n_heads": 2, "pos": "alibi", "fire": {"threshold": 8}},
 "data": {"source": "synthetic", "tokenizer": "synthetic", "synthetic": {"tokens": [8000, 1001, 1001]}},
 "train": {"seed": 2, "batch_size": 2, "seq_len": 16, "steps": 8, "eval_every": 4, "eval_batches": 1,
           "log_every": 1, "schedule": {"warmup": 2}}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

# name:pos:extra --set
variants="sandwich:sandwich: fire:fire: kpower:kerple:model.kerple.kind=power aheads:alibi:model.alibi_heads=1 logn:alibi:model.attn_scale=logn lln:rope:model.attn_scale=learned_logn"
for v in $variants; do
    IFS=: read -r name pos extra <<<"$v"
    set -- --set model.pos="$pos"
    [ -n "$extra" ] && set -- "$@" --set "$extra"
    expect_rc 0 "$name: train (stop at 4)" "$BIN" train cfg.json --out "$name" --quiet "$@" --stop-after 4
    expect_rc 0 "$name: resume" "$BIN" train --resume "$name" --quiet
    expect_rc 0 "$name: uninterrupted" "$BIN" train cfg.json --out "$name-ref" --quiet "$@"
    [ "$(trace "$name")" = "$(trace "$name-ref")" ] && [ "$(trace "$name" | wc -l)" -eq 8 ] && ok ||
        bad "$name: resumed trace differs from the uninterrupted one"
    expect_rc 0 "$name: eval nonoverlapping" "$BIN" eval "$name" --lengths 16,256 --json "$name-non.json" --quiet
    expect_rc 0 "$name: eval sliding" "$BIN" eval "$name" --lengths 16,256 --mode sliding --stride 8 \
        --json "$name-sl.json" --quiet
    "$PY" - "$name-non.json" "$name-sl.json" <<'EOF2' && ok || bad "$name: eval reports"
import json, math, sys
for p in sys.argv[1:]:
    rep = json.load(open(p))
    n = rep["split_tokens"]
    for r in rep["results"]:
        assert r["status"] == "ok", (p, r)
        assert r["tokens"] == n - 1 and math.isfinite(r["loss"]), (p, r["length"], r["tokens"], r["loss"])
EOF2
    expect_rc 0 "$name: export" "$BIN" export "$name" --out "$name-exp"
    expect_rc 0 "$name: train from export" "$BIN" train cfg.json --out "$name-init" --quiet "$@" \
        --set train.init_from="$name-exp/model.safetensors" --set train.optimizer.name=sgd \
        --set train.optimizer.lr=1e-30 --set train.optimizer.weight_decay=0 --set train.steps=1 \
        --set train.eval_every=1 --set train.schedule.warmup=0
    expect_rc 0 "$name: eval init_from run" "$BIN" eval "$name-init" --lengths 16,256 --json "$name-init.json" --quiet
    "$PY" - "$name-non.json" "$name-init.json" <<'EOF2' && ok || bad "$name: init_from run does not evaluate like its source"
import json, sys
a, b = (json.load(open(f))["results"] for f in sys.argv[1:3])
for x, y in zip(a, b):
    assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(x["loss"]), (x["loss"], y["loss"])
EOF2
done

# a sweep over two methods: labels name the method and the scaling
cat > sweep.json <<'EOF2'
{"base": "cfg.json", "grid": {"model.pos": ["sandwich", "fire"], "model.attn_scale": ["none", "logn"]}}
EOF2
expect_rc 0 "sweep" "$BIN" sweep sweep.json --out sw --quiet
"$PY" - sw/results.json <<'EOF2' && ok || bad "sweep labels"
import json, sys
labels = sorted(r["label"] for r in json.load(open(sys.argv[1]))["runs"])
assert labels == ["fire", "fire+logn", "sandwich", "sandwich+logn"], labels
EOF2

# model.alibi_heads: the label and report name the variant (heads = n_heads is plain ALiBi);
# a count past n_heads, or one for alibi_rf, is refused naming the key
cat > sweep2.json <<'EOF2'
{"base": "cfg.json", "grid": {"model.alibi_heads": [0, 1, 2]}, "eval": {"lengths": [16]}}
EOF2
expect_rc 0 "sweep over alibi_heads" "$BIN" sweep sweep2.json --out sw2 --quiet
"$PY" - sw2/results.json aheads-non.json <<'EOF2' && ok || bad "alibi_heads labels"
import json, sys
labels = sorted(r["label"] for r in json.load(open(sys.argv[1]))["runs"])
assert labels == ["alibi", "alibi", "alibi-heads1"], labels
assert json.load(open(sys.argv[2]))["model"]["alibi_heads"] == "heads1"
EOF2
expect_rc 2 "alibi_heads past n_heads" "$BIN" train cfg.json --out ah3 --quiet --set model.alibi_heads=3
expect_err "model.alibi_heads: 3 exceeds model.n_heads (2)"
expect_rc 2 "alibi_heads with alibi_rf" "$BIN" train cfg.json --out ahrf --quiet --set model.pos='"alibi_rf"' \
    --set model.alibi_heads=1
expect_err 'model.alibi_heads: applies to model.pos "alibi" only'
[ ! -e ah3 ] && [ ! -e ahrf ] && ok || bad "a refused config left a run directory"

echo "cli_pos_methods: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
