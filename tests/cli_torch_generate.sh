#!/usr/bin/env bash
# cli_torch_generate.sh - `stretch generate --temperature 0` against PyTorch: greedy
# decoding replayed by scripts/torch_gen_ref.py with the float64 model of
# scripts/torch_ref.py, from the text's definition in README.md ("generate"), well past
# --context (24 tokens of context for runs trained at 32, 80 tokens after the prompt):
#   KV cache of ALiBi, RoPE, T5, FoX: every layer attends to its last 24 keys (sliding
#   window; FoX's gates between key and query counted over the whole text);
#   KV cache of learned positions, and --no-cache: a fresh forward over the last 24 tokens;
#   --sinks 2 --window 8 of ALiBi and RoPE, the sinks at text and at cache positions: the
#   first 2 and last 8 tokens of the whole text, past --context too; where the two
#   positions give different texts, each replay rejects the other's;
#   --blockwise 8 of ALiBi and RoPE: blocks of 8 from the text's first token, each query
#   seeing its block and the previous one, past --context too; the plain cache's replay
#   rejects its text and the other way round.
# Each greedy byte must be the float64 argmax (up to a near tie, reported); where the two
# definitions give different texts (the ALiBi run here), each replay rejects the other's.
# Skipped when /usr/bin/python3 has no torch.
. "$(dirname "$0")/lib_cli.sh" torch_generate

need_torch cli_torch_generate
replay() { # WHAT MODE EXPORT OUTPUT
    if /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" "$3" "the quick" 80 24 "$2" "$4" > ref.txt 2>&1; then
        grep -q "greedy tokens equal" ref.txt && ok || bad "$1: no tokens compared"
    else
        bad "$1: stretch generate and the PyTorch replay differ"
    fi
    sed "s/^/$1: /" ref.txt
}
# cross_reject WHAT EXPORT MODE_A TEXT_A MODE_B TEXT_B: two definitions that generated
# different texts; each one's replay must reject the other's text (a mismatch, exit 1).
# Equal texts cannot be told apart: a note, no check.
cross_reject() {
    if cmp -s "$4" "$6"; then
        echo "note: $1: the two texts are equal on this machine: no cross check"
        return
    fi
    /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" "$2" "the quick" 80 24 "$3" "$6" > x1.txt 2>&1
    local r1=$?
    /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" "$2" "the quick" 80 24 "$5" "$4" > x2.txt 2>&1
    local r2=$?
    { [ $r1 = 1 ] && grep -q MISMATCH x1.txt && [ $r2 = 1 ] && grep -q MISMATCH x2.txt; } && ok ||
        bad "$1: a replay accepted the other definition's text: $(cat x1.txt x2.txt)"
}
for pos in alibi rope t5 learned fox; do
    tiny_text_run "$pos"
    "$PY" - <<'PYEOF'
import json
c = json.load(open("cfg.json"))
c["train"].update(steps=200, threads=2, optimizer={"lr": 0.01})
c["model"]["init_std"] = 0.02
json.dump(c, open("cfg.json", "w"))
PYEOF
    expect_rc 0 "$pos: train" "$BIN" train cfg.json --out "run_$pos" --quiet
    expect_rc 0 "$pos: export" "$BIN" export "run_$pos" --out "exp_$pos"
    gen=(generate "run_$pos" --prompt "the quick" --tokens 80 --temperature 0 --context 24)
    "$BIN" "${gen[@]}" > "cache_$pos.txt" 2>/dev/null && ok || bad "$pos: generate"
    "$BIN" "${gen[@]}" --no-cache > "nocache_$pos.txt" 2>/dev/null && ok || bad "$pos: generate --no-cache"
    mode=window; [ "$pos" = learned ] && mode=rerun
    replay "$pos, KV cache" "$mode" "exp_$pos" "cache_$pos.txt"
    replay "$pos, --no-cache" rerun "exp_$pos" "nocache_$pos.txt"
    case $pos in alibi|rope) ;; *) continue ;; esac
    for where in text cache; do
        "$BIN" "${gen[@]}" --sinks 2 --window 8 --positions "$where" > "sinks_${where}_$pos.txt" 2>/dev/null && ok ||
            bad "$pos: generate --sinks 2 --window 8 --positions $where"
        replay "$pos, sinks + window ($where positions)" "sinks:2:8:$where" "exp_$pos" "sinks_${where}_$pos.txt"
    done
    # the sinks' positions matter to the replay (both runs' texts differ here)
    cross_reject "$pos, sinks at text vs cache positions" "exp_$pos" sinks:2:8:text "sinks_text_$pos.txt" \
        sinks:2:8:cache "sinks_cache_$pos.txt"
    "$BIN" "${gen[@]}" --blockwise 8 > "bw_$pos.txt" 2>/dev/null && ok || bad "$pos: generate --blockwise 8"
    replay "$pos, blockwise 8" blockwise:8 "exp_$pos" "bw_$pos.txt"
    cross_reject "$pos, blocks vs the plain cache" "exp_$pos" window "cache_$pos.txt" blockwise:8 "bw_$pos.txt"
done
# the replay tells the two definitions apart: where the ALiBi run's texts differ (they do
# here: "...dog 1111" and "...dog 1110"), each definition rejects the other's text
cross_reject "alibi, KV cache vs --no-cache" exp_alibi window cache_alibi.txt rerun nocache_alibi.txt
finish cli_torch_generate
