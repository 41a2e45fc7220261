#!/usr/bin/env bash
# cli_torch_task.sh - `stretch eval --task` against PyTorch: every instance that
# `--show` prints is rebuilt into token ids from docs/tasks.md's vocabulary and scored by
# scripts/torch_task_ref.py with the float64 model of scripts/torch_ref.py in one full
# forward, while stretch ran it through its KV cache (prefill, then token by token, prompt
# chunks between answers). Per instance: the argmax answer tokens, the first wrong one,
# exact/wrong and k/n; per cell: accuracy, token accuracy and answer loss (1e-5). Tasks with
# answers at the end (copy, addition), between prompt chunks (MQAR, flip-flop) and a needle
# at five depths (passkey), under ALiBi, RoPE, T5, NoPE and KERPLE, at 1x and 2x (4x for
# copy) the largest training size; and FIRE with Abacus embeddings on addition, whose digit
# runs continue across the cache's prompt chunk and answer tokens. Skipped when /usr/bin/python3 has no torch.
. "$(dirname "$0")/lib_cli.sh" torch_task

need_torch cli_torch_task
# task pos min max steps scales [abacus rows: model.abacus, scored under the name task-abacus]
while read -r task pos lo hi steps scales abacus; do
    [ -n "$abacus" ] && task=$task-abacus
    cat > "$task.json" <<EOF
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "$pos", "abacus": {"rows": ${abacus:-0}}},
 "data": {"source": "task", "task": {"name": "${task%-abacus}", "min_size": $lo, "max_size": $hi}},
 "train": {"batch_size": 8, "seq_len": 48, "steps": $steps, "eval_batches": 1, "threads": 1,
           "optimizer": {"lr": 0.01}, "schedule": {"kind": "constant", "warmup": 0}}}
EOF
    expect_rc 0 "$task: train" "$BIN" train "$task.json" --out "run_$task" --quiet
    expect_rc 0 "$task: export" "$BIN" export "run_$task" --out "exp_$task"
    expect_rc 0 "$task: eval --task --show" "$BIN" eval "run_$task" --task --scales "$scales" --trials 8 --show 8 \
        --json "$task-report.json" --quiet
    cp out.txt "$task-show.txt"
    if /usr/bin/python3 "$SRC/scripts/torch_task_ref.py" "exp_$task" "$task-show.txt" "$task-report.json" \
        > ref.txt 2>&1; then
        ok
    else
        bad "$task ($pos): stretch eval --task and the PyTorch scoring differ"
    fi
    sed "s/^/$task: /" ref.txt
    # every printed instance was parsed (a line the script skipped would pass silently)
    n=$(grep -c ' trial [0-9]*: ' "$task-show.txt")
    grep -q "^  $n instances, .* cells: ok$" ref.txt && ok || bad "$task: $n instances printed, not all checked"
done <<'EOF'
copy alibi 2 4 60 1,2,4
addition none 1 3 40 1,2
addition fire 1 3 40 1,2,4 64
mqar rope 2 4 40 1,2
flipflop t5 4 8 40 1,2
passkey kerple 8 12 40 1,2
EOF
finish cli_torch_task
