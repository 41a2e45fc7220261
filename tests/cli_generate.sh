#!/usr/bin/env bash
# cli_generate.sh - `stretch generate` with the KV cache (default) against --no-cache (a
# forward over the last --context tokens for every token), on tiny byte-level runs of
# several position methods: the same text for a fixed seed while the sequence fits in
# --context; past it, the same text where the cache is exact (one-layer relative / rope
# models; sinusoidal and learned, which re-prefill the window); a deeper relative model
# slides its cache and still prints text of the asked length from the prompt on. fire (its
# bias depends on the absolute query position) re-prefills like the absolute methods.
# The sampling filters (--top-p, --min-p) keep the default's draws when off and reduce to
# greedy decoding when they keep one token.
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

# --precision bf16: the products in bf16 and the cache's keys and values in bf16, half
# the cache's memory (logged); sliding past the window so the bf16 rows shift too
expect_rc 0 "alibi fp32 cache" "$BIN" generate alibi --prompt "the quick" --tokens 40 --context 8 --precision fp32
b32=$(sed -n 's/.*kv cache: .*, fp32: .* MiB (\([0-9]*\) bytes).*/\1/p' err.txt)
expect_err "kv cache: .* bytes): keys and values, bias tables$"   # the total names what it holds
"$BIN" generate alibi --prompt "the quick" --tokens 40 --context 8 --precision bf16 >out.txt 2>err.txt; rc=$?
if [ $rc -ne 0 ] && grep -q "built without oneDNN" err.txt; then
    skip "generate --precision bf16: $(tail -1 err.txt)"
else
    [ $rc -eq 0 ] && ok || bad "generate --precision bf16: exit $rc: $(tail -2 err.txt)"
    b16=$(sed -n 's/.*kv cache: .*, bf16: .* MiB (\([0-9]*\) bytes).*/\1/p' err.txt)
    # keys and values take half; the distance-bias tables (2 layers x 4 heads x 8 floats) stay fp32
    [ -n "$b32" ] && [ -n "$b16" ] && [ $((2 * b16 - 256)) -eq "$b32" ] &&
        ok || bad "bf16 kv cache ${b16:-?} bytes against ${b32:-?} in fp32 (expected half the keys and values)"
    grep -q "^the quick" out.txt && [ "$(head -c -1 out.txt | wc -c)" -ge 40 ] && ok || bad "bf16 generation: $(cat out.txt)"
fi
expect_rc 2 "generate --precision fp16" "$BIN" generate alibi --precision fp16
expect_msg "--precision 'fp16': expected fp32 or bf16"

expect_rc 2 "generate --no-cache=1" "$BIN" generate alibi --no-cache=1
expect_msg "unknown option '--no-cache=1'"

# sampling filters (st_sample_token; the distributions are checked in test_sample.c):
# --top-p 1 and --min-p 0 are the defaults, so they draw what the default draws; a
# nucleus or min-p that keeps only the most probable token is greedy decoding; the
# filters go through the cache and --no-cache alike
"$BIN" generate alibi --prompt "the quick" --tokens 40 --seed 5 >default.txt 2>/dev/null
expect_rc 0 "generate --top-p 1 --min-p 0" "$BIN" generate alibi --prompt "the quick" --tokens 40 --seed 5 --top-p 1 --min-p 0
cmp -s out.txt default.txt && ok || bad "--top-p 1 --min-p 0 changed the text: $(cat out.txt) / $(cat default.txt)"
"$BIN" generate alibi --prompt "the quick" --tokens 40 --temperature 0 >greedy.txt 2>/dev/null
for f in "--top-p 1e-9" "--min-p 1"; do
    expect_rc 0 "generate $f" "$BIN" generate alibi --prompt "the quick" --tokens 40 --seed 5 --temperature 1.5 $f
    cmp -s out.txt greedy.txt && ok || bad "generate $f is not greedy: $(cat out.txt) / $(cat greedy.txt)"
done
expect_rc 0 "generate --top-p 0.5" "$BIN" generate alibi --prompt "the quick" --tokens 40 --seed 5 --temperature 2 --top-p 0.5
cmp -s out.txt default.txt && bad "--top-p 0.5 at temperature 2 drew the default text" || ok
same_text "alibi top-p + min-p" alibi --prompt "the quick" --tokens 40 --seed 8 --top-k 0 --top-p 0.9 --min-p 0.05
for v in 0 1.5 -0.1 nan x; do
    expect_rc 2 "generate --top-p $v" "$BIN" generate alibi --top-p "$v"
    expect_msg "--top-p '$v': number in (0, 1] expected"
done
for v in 1.01 -1 inf; do
    expect_rc 2 "generate --min-p $v" "$BIN" generate alibi --min-p "$v"
    expect_msg "--min-p '$v': number in \\[0, 1] expected"
done

# --prompt-file: a file's text (newlines included) or standard input is the prompt, as
# --prompt with the same text would be
printf 'the quick brown\nfox jumps' > prompt.txt
"$BIN" generate alibi --prompt "$(cat prompt.txt)" --tokens 30 --seed 6 >byarg.txt 2>/dev/null
expect_rc 0 "generate --prompt-file" "$BIN" generate alibi --prompt-file prompt.txt --tokens 30 --seed 6
cmp -s out.txt byarg.txt && ok || bad "--prompt-file differs from --prompt: $(cat out.txt) / $(cat byarg.txt)"
"$BIN" generate alibi --prompt-file - --tokens 30 --seed 6 <prompt.txt >out.txt 2>err.txt
cmp -s out.txt byarg.txt && ok || bad "--prompt-file - differs from --prompt: $(cat out.txt)"
expect_rc 3 "generate --prompt-file missing" "$BIN" generate alibi --prompt-file nofile.txt
expect_msg "--prompt-file nofile.txt: cannot open"
printf 'ab\0cd' > nul.txt
expect_rc 4 "generate --prompt-file with a NUL" "$BIN" generate alibi --prompt-file nul.txt
expect_msg "--prompt-file nul.txt: contains a NUL byte at offset 2"
expect_rc 2 "generate --prompt and --prompt-file" "$BIN" generate alibi --prompt x --prompt-file prompt.txt
expect_msg "give --prompt or --prompt-file, not both"

# no prompt, word level: the text is conditioned on <eos> (the start of a line), whose id
# is 0 only when the train split starts with a blank line; here it starts with words, so
# <eos> is a later id (review 41: it used to condition on the hidden word of id 0).
# Greedy: the unprompted text is what follows a prompt of one newline.
w=(fox dog cat)
for i in $(seq 1 300); do echo "the quick ${w[i % 3]} jumps over the lazy ${w[(i + 1) % 3]}"; done > words.txt
expect_rc 0 "train word" "$BIN" train cfg.json --out word --quiet --set data.tokenizer=word --set data.path=words.txt
"$PY" -c "import json,sys; t=json.load(open('word/tokenizer.json'))['tokens']; sys.exit(t.index('<eos>') == 0)" \
    && ok || bad "the word run's <eos> is id 0: the check below would not tell"
expect_rc 0 "generate word, no prompt" "$BIN" generate word --tokens 12 --temperature 0
cp out.txt bare.txt
expect_rc 0 "generate word, a newline" "$BIN" generate word --prompt $'\n' --tokens 12 --temperature 0
cmp -s bare.txt <(tail -c +2 out.txt) && ok || bad "no-prompt text '$(cat bare.txt)' is not the continuation of <eos> '$(cat out.txt)'"

finish cli_generate
