#!/usr/bin/env bash
# cli_random_positions.sh - train.random_positions (Ruoss et al. 2023) end to end: every
# method that reads absolute indices trains with it, a run stopped and resumed has the
# uninterrupted run's loss trace bit for bit (the positions are a function of the window
# index), it differs from training without it (so the option acts), evaluation of the run
# works at 4x, and bad values are exit 2 naming the key: N <= train.seq_len, a method of
# distances only, N beyond learned's table. Nothing is written for a refused config.
. "$(dirname "$0")/lib_cli.sh" cli_random_positions

cat > cfg.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "max_len": 256},
 "data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [20000, 2000, 2000]}},
 "train": {"seed": 4, "batch_size": 4, "seq_len": 16, "steps": 12, "eval_every": 6, "eval_batches": 1,
           "log_every": 1, "checkpoint_every": 6, "random_positions": 128, "schedule": {"warmup": 2}},
 "eval": {"lengths": [16, 64]}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

for m in sinusoidal learned rope xpos fire; do
    expect_rc 0 "$m: train 12 steps" "$BIN" train cfg.json --out "$m" --quiet --set model.pos=$m
    expect_rc 0 "$m: train to step 6" "$BIN" train cfg.json --out "$m-r" --quiet --set model.pos=$m --stop-after 6
    expect_rc 0 "$m: resume" "$BIN" train --resume "$m-r" --quiet
    [ "$(trace "$m" | wc -l)" = 12 ] && [ "$(trace "$m")" = "$(trace "$m-r")" ] && ok ||
        { bad "$m: resumed trace differs"; diff <(trace "$m") <(trace "$m-r") | head -4; }
    expect_rc 0 "$m: train without random positions" "$BIN" train cfg.json --out "$m-plain" --quiet --set model.pos=$m \
        --set train.random_positions=0
    [ "$(trace "$m" | sed -n 2p)" != "$(trace "$m-plain" | sed -n 2p)" ] && ok || bad "$m: random positions change nothing"
    expect_rc 0 "$m: eval at 4x" "$BIN" eval "$m" --lengths 64 --max-tokens 1000 --quiet
done
grep -q '"random_positions": 128' rope/config.json && ok || bad "the run's config does not record train.random_positions"

expect_rc 2 "N <= seq_len" "$BIN" train cfg.json --out bad1 --quiet --set model.pos=rope --set train.random_positions=16
expect_err "train.random_positions: 16 must exceed train.seq_len (16)"
expect_rc 2 "alibi" "$BIN" train cfg.json --out bad2 --quiet --set model.pos=alibi
expect_err "train.random_positions: model.pos \"alibi\" reads no absolute token indices (it applies to sinusoidal, learned, rope"
expect_rc 2 "learned beyond its table" "$BIN" train cfg.json --out bad3 --quiet --set model.pos=learned --set train.random_positions=300
expect_err "train.random_positions: 300 exceeds the 256 tokens learned positions represent"
expect_rc 2 "negative" "$BIN" train cfg.json --out bad4 --quiet --set model.pos=rope --set train.random_positions=-1
expect_err "train.random_positions"
for d in bad1 bad2 bad3 bad4; do [ ! -e "$d" ] && ok || bad "$d written for a refused config"; done
finish cli_random_positions
