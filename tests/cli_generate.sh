#!/usr/bin/env bash
# cli_generate.sh - `stretch generate` with the KV cache (default) against --no-cache (a
# forward over the last --context tokens for every token), on tiny byte-level runs of
# several position methods: the same text for a fixed seed while the sequence fits in
# --context; past it, the same text where the cache is exact (one-layer relative / rope
# models; sinusoidal and learned, which re-prefill the window); a deeper relative model
# slides its cache and still prints text of the asked length from the prompt on. fire (its
# bias depends on the absolute query position) re-prefills like the absolute methods.
# init_std 0.3 and 20 steps: a sharp, barely trained model, so an error in the attention
# or the positions changes the sampled bytes (at 0.02 the logits are near-uniform).
. "$(dirname "$0")/lib_cli.sh" cli_generate

for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > corpus.txt
cat > cfg.json <<'EOF2'
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi", "max_len": 64, "init_std": 0.3},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 32, "steps": 20, "eval_every": 20, "eval_batches": 1,
           "log_every": 20, "schedule": {"warmup": 2}}}
EOF2
runs="alibi rope t5 sinusoidal learned alibi1 rope1 sandwich fire"
for r in $runs; do
    pos=${r%1}; layers=2; [ "$r" != "$pos" ] && layers=1
    expect_rc 0 "train $r" "$BIN" train cfg.json --out "$r" --quiet --set model.pos="$pos" --set model.n_layers=$layers
done

# within the window (default --context 1024): every method
for r in $runs; do
    same_text "$r within the window" "$r" --prompt "the quick" --tokens 40 --seed 7
done
same_text "alibi greedy" alibi --prompt "the lazy dog" --tokens 30 --temperature 0
# past the window (--context 12, 50 tokens): exact for one layer and for absolute positions
for r in alibi1 rope1 sinusoidal learned fire; do
    same_text "$r past the window" "$r" --prompt "the quick brown fox" --tokens 50 --context 12 --seed 9
done
# a prompt longer than the window: both start from its last --context tokens
same_text "learned, prompt longer than the window" learned --prompt "the quick brown fox jumps over the lazy dog" --tokens 10 --context 8 --seed 2
same_text "alibi1, prompt longer than the window" alibi1 --prompt "the quick brown fox jumps over the lazy dog" --tokens 10 --context 8 --seed 2

# two layers past the window: the cache slides (sliding-window attention, not the
# window recomputed per token), so only the shape of the output is checked
expect_rc 0 "alibi sliding cache" "$BIN" generate alibi --prompt "the quick" --tokens 60 --context 8 --seed 4
grep -q "^the quick" out.txt && ok || bad "sliding generation does not start with the prompt"
[ "$(head -c -1 out.txt | wc -c)" -ge 60 ] && ok || bad "sliding generation shorter than prompt + 60 bytes"

expect_rc 2 "generate --no-cache=1" "$BIN" generate alibi --no-cache=1
expect_msg "unknown option '--no-cache=1'"

echo "cli_generate: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
