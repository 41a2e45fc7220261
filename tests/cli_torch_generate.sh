#!/usr/bin/env bash
# cli_torch_generate.sh - `stretch generate --temperature 0` against PyTorch: greedy
# decoding replayed by scripts/torch_gen_ref.py with the float64 model of
# scripts/torch_ref.py, from the text's definition in README.md ("generate"), well past
# --context (24 tokens of context for runs trained at 32, 80 tokens after the prompt):
#   KV cache of ALiBi, RoPE, T5: every layer attends to its last 24 keys (sliding window);
#   KV cache of learned positions, and --no-cache: a fresh forward over the last 24 tokens;
#   --sinks 2 --window 8 of ALiBi and RoPE, the sinks at text and at cache positions: the
#   first 2 and last 8 tokens of the whole text, past --context too; where the two
#   positions give different texts, each replay rejects the other's.
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
for pos in alibi rope t5 learned; do
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
    # the sinks' positions matter to the replay (the ALiBi run's texts differ here)
    if cmp -s "sinks_text_$pos.txt" "sinks_cache_$pos.txt"; then
        echo "note: $pos: the texts at text and cache positions are equal on this machine: no cross check"
    else
        /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" "exp_$pos" "the quick" 80 24 sinks:2:8:text \
            "sinks_cache_$pos.txt" > x1.txt 2>&1
        r1=$?
        /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" "exp_$pos" "the quick" 80 24 sinks:2:8:cache \
            "sinks_text_$pos.txt" > x2.txt 2>&1
        r2=$?
        { [ $r1 = 1 ] && grep -q MISMATCH x1.txt && [ $r2 = 1 ] && grep -q MISMATCH x2.txt; } && ok ||
            bad "$pos: a sinks replay accepted the other positions' text: $(cat x1.txt x2.txt)"
    fi
done
# the replay tells the two definitions apart: where the ALiBi run's texts differ (they do
# here: "...dog 1111" and "...dog 1110"), each definition rejects the other's text
if cmp -s cache_alibi.txt nocache_alibi.txt; then
    echo "note: the ALiBi run's cached and --no-cache texts are equal on this machine: no cross check"
else
    /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" exp_alibi "the quick" 80 24 rerun cache_alibi.txt > x1.txt 2>&1
    r1=$?
    /usr/bin/python3 "$SRC/scripts/torch_gen_ref.py" exp_alibi "the quick" 80 24 window nocache_alibi.txt > x2.txt 2>&1
    r2=$?
    { [ $r1 = 1 ] && grep -q MISMATCH x1.txt && [ $r2 = 1 ] && grep -q MISMATCH x2.txt; } && ok ||
        bad "alibi: a replay accepted the other definition's text: $(cat x1.txt x2.txt)"
fi
finish cli_torch_generate
