#!/usr/bin/env bash
# cli_torch_eval.sh - `stretch eval` against PyTorch: the perplexity protocols rebuilt from
# docs/evaluation.md by scripts/torch_eval_ref.py on the float64 model of
# scripts/torch_ref.py, for an ALiBi and a RoPE byte-level run exported with `stretch export`:
#   nonoverlapping  L = 16, 48 (does not divide the stream), 100, 4096 (past the stream: one
#                   window), 3 linear buckets (bounds that round)
#   sliding         L = 48, 64, 40 at stride 20 (48 and 64 not multiples of it), log2
#                   buckets; L = 24 at stride 1 (the paper's analysis setting) on the
#                   first 300 tokens (--max-tokens)
#   transforms      ALiBi: sinks 2 + window 12 at their cache positions (L = 48, 100),
#                   ALiBi slope interpolation (sliding, L = 40, stride 20); RoPE: YaRN with
#                   sinks + window (L = 48, 100: s = L / 32 each), dynamic NTK (sliding
#                   L = 40, stride 20: each window's own length, the clipped last one
#                   included), ReRoPE clipped at 8 (L = 48); both: blockwise causal
#                   attention, blocks of 16 (L = 48, 100) and of 12 (sliding, L = 64,
#                   stride 20: the scored rows' tail forward)
# Windows, scored and forward tokens and bucket bounds/counts must agree exactly; nll, loss,
# bpb and each bucket's nll to 1e-6 relative. Skipped when /usr/bin/python3 has no torch.
. "$(dirname "$0")/lib_cli.sh" torch_eval

need_torch cli_torch_eval
for pos in alibi rope fox; do
    tiny_text_run "$pos"
    expect_rc 0 "$pos: train" "$BIN" train cfg.json --out "run_$pos" --quiet
    expect_rc 0 "$pos: export" "$BIN" export "run_$pos" --out "exp_$pos"
    head -c 1200 corpus.txt > held.txt
    expect_rc 0 "$pos: eval nonoverlapping" "$BIN" eval "run_$pos" --data held.txt --lengths 16,48,100,4096 \
        --buckets 3 --json "$pos-a.json" --quiet
    expect_rc 0 "$pos: eval sliding" "$BIN" eval "run_$pos" --data held.txt --lengths 48,64,40 --stride 20 \
        --bucket-scale log2 --buckets 1 --json "$pos-b.json" --quiet
    expect_rc 0 "$pos: eval sliding, stride 1" "$BIN" eval "run_$pos" --data held.txt --lengths 24 --stride 1 \
        --max-tokens 300 --buckets 5 --json "$pos-c.json" --quiet
    if [ "$pos" = alibi ]; then
        expect_rc 0 "$pos: eval, sinks + window" "$BIN" eval "run_$pos" --data held.txt --lengths 48,100 \
            --sinks 2 --window 12 --positions cache --json "$pos-d.json" --quiet
        expect_rc 0 "$pos: eval, slope interpolation" "$BIN" eval "run_$pos" --data held.txt --lengths 40 \
            --stride 20 --transform alibi_interp --json "$pos-e.json" --quiet
        rows=11
    elif [ "$pos" = fox ]; then   # forget gates: a window alone (sinks are refused)
        expect_rc 0 "$pos: eval, window" "$BIN" eval "run_$pos" --data held.txt --lengths 48,100 \
            --window 12 --json "$pos-d.json" --quiet
        rows=10
    else
        expect_rc 0 "$pos: eval, yarn + sinks + window" "$BIN" eval "run_$pos" --data held.txt --lengths 48,100 \
            --transform yarn --sinks 2 --window 12 --json "$pos-d.json" --quiet
        expect_rc 0 "$pos: eval, dynamic ntk" "$BIN" eval "run_$pos" --data held.txt --lengths 40 --stride 20 \
            --transform dynamic_ntk --json "$pos-e.json" --quiet
        expect_rc 0 "$pos: eval, rerope" "$BIN" eval "run_$pos" --data held.txt --lengths 48 \
            --transform rerope --clip 8 --json "$pos-f.json" --quiet
        rows=12
    fi
    expect_rc 0 "$pos: eval, blocks" "$BIN" eval "run_$pos" --data held.txt --lengths 48,100 --blockwise 16 \
        --json "$pos-g.json" --quiet
    expect_rc 0 "$pos: eval, blocks, sliding" "$BIN" eval "run_$pos" --data held.txt --lengths 64 --stride 20 \
        --blockwise 12 --json "$pos-h.json" --quiet
    rows=$((rows + 3))
    if /usr/bin/python3 "$SRC/scripts/torch_eval_ref.py" "exp_$pos" held.txt "$pos"-[a-h].json > ref.txt 2>&1; then
        ok
    else
        bad "$pos: stretch eval and the PyTorch protocols differ"
    fi
    cat ref.txt
    # every report row was checked (a report the script skipped would pass silently)
    n=$(grep -c ': ok$' ref.txt)
    [ "$n" = "$rows" ] && ok || bad "$pos: $n of $rows report rows checked and matching"
done
finish cli_torch_eval
