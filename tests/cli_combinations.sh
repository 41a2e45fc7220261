#!/usr/bin/env bash
# cli_combinations.sh - every position method x inference-time transform x attention mask
# (none, a window, sinks + window, blocks of 4: with no transform, rerope's second query and
# alibi_interp's slopes, the others being RoPE frequency changes like rerope's) through `stretch eval` and `stretch generate` (KV cache
# and --no-cache) on tiny runs. Each command must exit 0 or refuse with the documented
# config exit (2, "stretch CMD: error" or the flag named): never a signal, never another code.
# When both generate paths run, they must print the same text (same seed, temperature 1):
# the cache equals the full forward under every combination, log-n scaling included
# (issue 24: a NULL bias hook called under --window for cope; logn's n counted differently
# by the cache and the forward under sinks + window).
# The method list is read from the registry (include/st_model.h), the transform list from
# the binary's own usage error, so a new method or transform is walked without an edit here.
. "$(dirname "$0")/lib_cli.sh" cli_combinations

for i in $(seq 1 200); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > corpus.txt
cat > cfg.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "init_std": 0.3},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 2, "seq_len": 16, "steps": 2, "eval_every": 2, "eval_batches": 1,
           "log_every": 2, "schedule": {"warmup": 0}},
 "eval": {"lengths": [16]}}
EOF2

methods=$(sed -n '/#define ST_POS_METHODS(X)/,/^$/p' "$SRC/include/st_model.h" | grep -o 'X([A-Z0-9_]*, [a-z0-9_]*)' |
          sed 's/.*, \([a-z0-9_]*\))/\1/')
[ "$(echo "$methods" | wc -w)" -ge 12 ] && ok || bad "method list from st_model.h: '$methods'"
"$BIN" eval nowhere --transform bogus >/dev/null 2>err.txt
transforms=$(sed -n "s/.*--transform 'bogus': expected \(.*\)/\1/p" err.txt | sed 's/,\| or / /g')
[ "$(echo "$transforms" | wc -w)" -ge 7 ] && ok || bad "transform list from the usage error: '$transforms'"

# run: the command with its exit code checked; 0 or 2 (a refusal naming what it refuses)
allowed() { # what command...
    local what=$1; shift
    "$@" >out.txt 2>err.txt; local rc=$?
    case $rc in
        0) ok; return 0 ;;
        2) if grep -q -- "error\|--\|model\.\|eval\." err.txt; then ok; else bad "$what: exit 2 without a message"; cat err.txt; fi
           return 2 ;;
        *) bad "$what: exit $rc (a signal or an undocumented code)"; tail -3 err.txt; return 1 ;;
    esac
}

masks=("" "--window 8" "--sinks 2 --window 8" "--blockwise 4")
# walk M: every check of method M's two runs, in the directory w_M with the counters
# started at 0, which it writes to w_M/counts (run in a subshell: its own out.txt, err.txt)
walk() {
    local m=$1 sc x mk run what rc1 rc2
    passes=0; fails=0
    mkdir "w_$m" && cp corpus.txt cfg.json "w_$m/" && cd "w_$m" || { echo "FAIL: $m: no work directory"; return 1; }
    for sc in none logn; do
        run="$m-$sc"
        expect_rc 0 "train $run" "$BIN" train cfg.json --out "$run" --quiet --set model.pos="$m" --set model.attn_scale="$sc"
        [ -d "$run" ] || continue
        for x in $transforms; do
            # log-n runs walk the masks alone: the transforms are independent of the scaling
            [ "$sc" = logn ] && [ "$x" != none ] && continue
            for mk in "${masks[@]}"; do
                case "$mk:$x" in --blockwise*:none|--blockwise*:rerope|--blockwise*:alibi_interp|--[!b]*|:*) ;; *) continue ;; esac
                what="$run --transform $x $mk"
                # shellcheck disable=SC2086
                allowed "eval $what" "$BIN" eval "$run" --lengths 32 --max-tokens 200 --transform "$x" $mk --quiet
                # shellcheck disable=SC2086
                allowed "generate $what" "$BIN" generate "$run" --prompt "the quick" --tokens 24 --context 32 --seed 5 \
                    --transform "$x" $mk; rc1=$?
                cp out.txt cached.txt
                # shellcheck disable=SC2086
                allowed "generate --no-cache $what" "$BIN" generate "$run" --prompt "the quick" --tokens 24 --context 32 \
                    --seed 5 --transform "$x" $mk --no-cache; rc2=$?
                [ "$rc1" = "$rc2" ] && ok || bad "$what: the cache (exit $rc1) and --no-cache (exit $rc2) disagree"
                if [ "$rc1" = 0 ] && [ "$rc2" = 0 ]; then
                    cmp -s cached.txt out.txt && ok || { bad "$what: cached and --no-cache text differ"; diff cached.txt out.txt | head -4; }
                fi
            done
        done
    done
    echo "$passes $fails" > counts
}
# The commands of tiny runs are single-threaded in effect (start-up, a checkpoint read, a
# few small products): one method per core at a time. Messages are printed in method
# order once all are done.
cores=$(nproc 2>/dev/null || echo 2)
for m in $methods; do
    ( walk "$m" ) > "log_$m.txt" 2>&1 &
    while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n; done
done
wait
for m in $methods; do
    cat "log_$m.txt"
    if read -r p f < "w_$m/counts" 2>/dev/null; then
        passes=$((passes + p)); fails=$((fails + f))
    else
        bad "$m: its walk ended before writing its counts"
    fi
done
finish cli_combinations
