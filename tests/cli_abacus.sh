#!/usr/bin/env bash
# cli_abacus.sh - model.abacus (Abacus embeddings, McLeish et al. 2024) end to end:
#   - model.abacus.digit0 -1 becomes the data's "0": 11 for a task vocabulary, 48 for bytes,
#     saved in the run's config; the log names "+abacus";
#   - train.abacus_max_k draws its offset per micro-batch from the window index: a run
#     stopped and resumed has the uninterrupted run's loss trace bit for bit, and the
#     offset changes the trace (so it acts);
#   - eval, eval --task, sweeps (labelled "+abacus") and generate (KV cache = --no-cache)
#     read the table; a run of digits longer than the table at evaluation is exit 2 naming
#     model.abacus.rows;
#   - refused with exit 2 naming the key, nothing written: a word vocabulary (no digit
#     ids), too few rows for train.abacus_max_k + train.seq_len, a digit0 past the
#     vocabulary; train.abacus_max_k without a table is named as without effect.
# The model itself is checked against PyTorch in test_pytorch_ref and cli_torch_task.
. "$(dirname "$0")/lib_cli.sh" cli_abacus

cat > add.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "none", "abacus": {"rows": 48}},
 "data": {"source": "task", "task": {"name": "addition", "min_size": 1, "max_size": 3, "format": "reversed", "pack": true}},
 "train": {"seed": 5, "batch_size": 4, "seq_len": 24, "steps": 8, "eval_every": 4, "eval_batches": 1, "threads": 1,
           "log_every": 1, "checkpoint_every": 4, "abacus_max_k": 20, "schedule": {"kind": "constant", "warmup": 0}}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

expect_rc 0 "task run" "$BIN" train add.json --out add
expect_err "model: none+abacus, 1 layers"
grep -A3 '"abacus"' add/config.json | grep -q '"digit0": 11' && ok || bad "task run: digit0 not the task vocabulary's 11"
expect_rc 0 "stopped at 4" "$BIN" train add.json --out add-r --quiet --stop-after 4
expect_rc 0 "resumed" "$BIN" train --resume add-r --quiet
[ "$(trace add | wc -l)" = 8 ] && [ "$(trace add)" = "$(trace add-r)" ] && ok ||
    { bad "resumed trace differs"; diff <(trace add) <(trace add-r) | head -4; }
expect_rc 0 "without the offset" "$BIN" train add.json --out add-k0 --quiet --set train.abacus_max_k=0
[ "$(trace add | sed -n 2p)" != "$(trace add-k0 | sed -n 2p)" ] && ok || bad "train.abacus_max_k changes nothing"
expect_rc 0 "eval --task" "$BIN" eval add --task --scales 1,2,4 --trials 4 --quiet --json task.json
grep -Eq '"abacus_rows":[[:space:]]*48' task.json && ok || bad "the task report's model object lacks abacus_rows"

# a sweep labels the Abacus run "none+abacus" in both its tables (perplexity and task)
cat > sw.json <<'EOF2'
{"base": "add.json", "set": {"train.steps": 2, "train.eval_every": 2},
 "variants": [{"name": "plain", "model.abacus.rows": 0, "train.abacus_max_k": 0}, {"name": "ab"}],
 "eval": {"lengths": [24], "task_scales": [1, 2], "task_trials": 2}, "out": "sw"}
EOF2
expect_rc 0 "sweep" "$BIN" sweep sw.json --quiet
[ "$(grep -c '^| ab | none+abacus |' sw/results.md)" = 2 ] && [ "$(grep -c '^| plain | none |' sw/results.md)" = 2 ] &&
    ok || bad "sweep labels: $(grep -E '^\| (ab|plain) ' sw/results.md)"

# a byte-level text run: "0" is byte 48; numbers up to 6 digits
for i in $(seq 1 300); do echo "line $i says $((i * 7919)) and $((i * 31))"; done > corpus.txt
cat > text.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi", "abacus": {"rows": 40}},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 32, "steps": 6, "eval_every": 6, "eval_batches": 1, "threads": 1,
           "abacus_max_k": 4, "schedule": {"warmup": 0}}}
EOF2
expect_rc 0 "byte run" "$BIN" train text.json --out text --quiet
grep -A3 '"abacus"' text/config.json | grep -q '"digit0": 48' && ok || bad "byte run: digit0 not 48"
expect_rc 0 "eval at 4x" "$BIN" eval text --lengths 32,128 --quiet
same_text "generate through digits" text --prompt "line 12 says 95028 and 3" --tokens 40 --temperature 0 --seed 1
# a run of 45 digits: its 40th needs row 40, the table has rows 0..39
{ head -c 2000 corpus.txt; printf '%s\n' "$(printf '1%.0s' $(seq 1 45))"; head -c 2000 corpus.txt; } > long.txt
expect_rc 2 "a run past the table" "$BIN" eval text --data long.txt --lengths 128 --quiet --json long.json
expect_err "model.abacus.rows: a run of 40 digits needs row 40, the table has 40 rows"

# refusals
big_vocab_cfg word.json
expect_rc 2 "word vocabulary" "$BIN" train word.json --out w1 --quiet --set model.abacus.rows=64
expect_err "model.abacus.digit0: the word tokenizer does not give the digits 0-9 as ten single tokens"
expect_rc 2 "too few rows" "$BIN" train add.json --out w2 --quiet --set model.abacus.rows=44
expect_err "model.abacus.rows: 44 rows; training reads up to row train.abacus_max_k + train.seq_len = 44"
expect_rc 2 "digit0 past the vocabulary" "$BIN" train add.json --out w3 --quiet --set model.abacus.digit0=30
expect_err "model.abacus.digit0: 30: the ten digit ids must lie in the vocabulary"
for d in w1 w2 w3; do [ ! -e "$d" ] && ok || bad "$d written for a refused config"; done
expect_rc 0 "offset without a table" "$BIN" train add.json --out w4 --set model.abacus.rows=0 --set train.steps=1
expect_err "so without effect: train.abacus_max_k 20"
finish cli_abacus
