#!/usr/bin/env bash
# cli_export.sh - `stretch export` and `stretch generate` end to end: a tiny byte-level run
# is exported (model.safetensors readable by a plain safetensors parser, config.json,
# tokenizer.json), a new run initialised from the export (train.init_from) starts from the
# same weights (identical first validation loss when no step is taken), generation prints
# text and is deterministic for a seed, and bad arguments / an occupied export dir fail
# with the documented codes without touching existing files.
. "$(dirname "$0")/lib_cli.sh" cli_export

# a small UTF-8 text corpus made here (no shared data needed)
for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog; héllo wörld $((i * 7))"; done > corpus.txt
cat > cfg.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 32, "steps": 30, "eval_every": 30, "eval_batches": 2,
           "log_every": 30, "schedule": {"warmup": 2}}}
EOF2
expect_rc 0 "train" "$BIN" train cfg.json --out run --quiet
expect_rc 0 "export" "$BIN" export run --out exp
for f in model.safetensors config.json tokenizer.json; do [ -s "exp/$f" ] && ok || bad "export lacks $f"; done

# the file parses as safetensors with the documented names and F32 [out,in] shapes
"$PY" - exp/model.safetensors <<'EOF2' && ok || bad "safetensors header"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
assert n % 8 == 0
assert h["blocks.0.attn.qkv.weight"]["shape"] == [96, 32], h["blocks.0.attn.qkv.weight"]
assert h["blocks.0.ffn.fc1.weight"]["shape"] == [128, 32]
assert h["tok_emb.weight"]["shape"] == [256, 32] and "lm_head.weight" not in h
assert all(v["dtype"] == "F32" for k, v in h.items() if k != "__metadata__")
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
assert 8 + n + end == len(b), (8 + n + end, len(b))
EOF2

# occupied export dir: refused (exit 3), file untouched; --force replaces
sum1=$(sha256sum exp/model.safetensors)
expect_rc 3 "export over an existing export" "$BIN" export run --out exp
[ "$(sha256sum exp/model.safetensors)" = "$sum1" ] && ok || bad "existing export was modified"
expect_rc 0 "export --force" "$BIN" export run --out exp --force

# init_from: a run started from the export with a vanishing SGD step (lr 1e-30 cannot move
# a float32 weight of magnitude > 1e-22) evaluates exactly like the source run
expect_rc 0 "train from export" "$BIN" train cfg.json --out run2 --quiet --set train.init_from="exp/model.safetensors" \
    --set train.optimizer.name=sgd --set train.optimizer.lr=1e-30 --set train.optimizer.weight_decay=0 \
    --set train.steps=1 --set train.eval_every=1 --set train.schedule.warmup=0
expect_rc 0 "eval source" "$BIN" eval run --lengths 32,64 --json e1.json --quiet
expect_rc 0 "eval init_from run" "$BIN" eval run2 --lengths 32,64 --json e2.json --quiet
"$PY" - e1.json e2.json <<'EOF2' && ok || bad "init_from run does not evaluate like its source"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ra = a["results"] if "results" in a else a["rows"]
rb = b["results"] if "results" in b else b["rows"]
for x, y in zip(ra, rb):
    assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(x["loss"]), (x["loss"], y["loss"])
EOF2

# generate: text out, deterministic for a seed, different for another seed
expect_rc 0 "generate" "$BIN" generate run --prompt "the quick" --tokens 40 --seed 5
cp out.txt g1.txt
grep -q "^the quick" g1.txt && ok || bad "generation does not start with the prompt"
[ "$(wc -c < g1.txt)" -gt 40 ] && ok || bad "generation too short"
expect_rc 0 "generate again" "$BIN" generate run --prompt "the quick" --tokens 40 --seed 5
cmp -s g1.txt out.txt && ok || bad "generation not deterministic for a seed"
expect_rc 0 "generate greedy" "$BIN" generate run --tokens 20 --temperature 0

# bad arguments
expect_rc 2 "export without --out" "$BIN" export run
expect_rc 2 "generate bad --tokens" "$BIN" generate run --tokens -3
expect_rc 3 "export of a missing run" "$BIN" export nowhere --out x

# every subcommand answers --help with its usage on stdout and exit 0
for c in train eval sweep generate export bench data selfcheck; do
    expect_rc 0 "$c --help" "$BIN" "$c" --help
    grep -q "stretch $c" out.txt && ok || bad "$c --help: no usage on stdout"
done

echo "cli_export: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
