#!/usr/bin/env bash
# cli_task.sh - generated tasks end to end (docs/tasks.md): a tiny model trained on copy
# (sizes 1..4, 4 symbols, answer-only loss) reaches exact-match accuracy 1.0 at 1x under
# `stretch eval RUN --task`, whose table and JSON have a row per size (1x and 2x here), the
# same report for the same seed, and a transform label in the name when one is given; a
# resumed task run draws the same rows (bit-exact trace); `generate` prints task tokens
# by name; a sweep of task runs writes the accuracy table and task_results.csv. Bad input
# is refused with the documented exit code naming the key or flag, and nothing written:
# unknown task, sizes out of range, a key of another task, a task key on a text source,
# an instance longer than train.seq_len + 1, --task of another task, --depths on a task
# without depth or outside [0, 1], --data on a task run, --lengths on a task run.
. "$(dirname "$0")/lib_cli.sh" cli_task

cat > cfg.json <<'EOF2'
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "copy", "min_size": 1, "max_size": 4, "symbols": 4}},
 "train": {"seed": 1, "batch_size": 32, "seq_len": 10, "steps": 3500, "threads": 1,
           "optimizer": {"name": "adamw", "lr": 0.01}, "schedule": {"kind": "cosine", "warmup": 50},
           "eval_every": 500, "eval_batches": 2, "checkpoint_every": 3500, "log_every": 100},
 "eval": {"lengths": [10, 20]}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

expect_rc 0 "train copy" "$BIN" train cfg.json --out run --quiet
expect_rc 0 "eval --task" "$BIN" eval run --task --scales 1,2 --trials 100 --threads 1
expect_out "task copy: exact match"
[ "$(grep -cE '^ +(4|8) +[12]\.00 ' out.txt)" = 2 ] && ok || { bad "table rows"; cat out.txt; }
"$PY" - run/eval_task_copy.json <<'EOF2' && ok || bad "copy at 1x is not 1.0, or the report is malformed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["task"] == "copy" and r["trials"] == 100 and r["train_max_size"] == 4 and r["pos"] == "alibi", r
rows = r["results"]
assert [(x["size"], x["scale"]) for x in rows] == [(4, 1.0), (8, 2.0)], rows
assert rows[0]["accuracy"] == 1.0 and rows[0]["token_accuracy"] == 1.0, rows[0]
assert rows[0]["tokens"] == 10 and rows[1]["tokens"] == 18, rows
for x in rows:
    assert 0 <= x["accuracy"] <= x["token_accuracy"] <= 1 and x["answer_loss"] >= 0, x
EOF2
cp run/eval_task_copy.json first.json
expect_rc 0 "eval again" "$BIN" eval run --task copy --scales 1,2 --trials 100 --threads 1 --quiet
grep -q "may take hours" err.txt && bad "a long-size warning at 2x: $(cat err.txt)" || ok
# scales that round below 1 or onto a size already listed: said, and each size evaluated
# once (0.01 became size 1 silently, 1 and 1.1 two rows of one figure)
expect_rc 0 "scales rounding together" "$BIN" eval run --task --scales 0.01,1,1.1 --trials 3 --threads 1 --json sc.json
expect_err "warning: eval --scales 0.01: 0.01 x 4 (data.task.max_size) rounds to size 0; evaluated at size 1"
expect_err "warning: eval --scales 1.1: size 4, as 1 gives: evaluated once"
[ "$(grep -cE '^ +(1|4) +[01]\.[0-9]+ ' out.txt)" = 2 ] && ok || { bad "table rows of distinct sizes"; cat out.txt; }
"$PY" -c 'import json, sys; r = json.load(open("sc.json"))["results"]; sys.exit([x["size"] for x in r] != [1, 4])' \
    && ok || bad "report rows of --scales 0.01,1,1.1: $(grep '"size"' sc.json)"
# a size whose instances are past 2^16 tokens: a warning with the token count before the
# work starts (--sizes 1048576 ran for hours without one); stopped after it is said
timeout 5 "$BIN" eval run --task --sizes 40000 --trials 1 --threads 1 --json long.json >out.txt 2>err.txt
expect_err "warning: eval --task: size 40000 makes instances of 80002 tokens; 8e+04 tokens in all (1 trial x 1 depth per size)"
cmp -s first.json run/eval_task_copy.json && ok || bad "the same seed gives another report"
expect_rc 0 "eval with a window" "$BIN" eval run --task --sizes 3 --trials 5 --sinks 1 --window 6 --quiet
# --show: every instance of the cells, as the evaluation ran them: the exact matches and
# the answer tokens right add up to the table's (and the report's) accuracy
expect_rc 0 "eval --show" "$BIN" eval run --task --sizes 2,5 --trials 6 --show 6 --json show.json --quiet
/usr/bin/python3 - out.txt show.json <<'PYEOF' && ok || bad "--show does not add up to the report: $(tail -14 out.txt)"
import json, re, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("size ")]
rep = json.load(open(sys.argv[2]))
assert len(lines) == 12, lines
for cell in rep["results"]:
    mine = [l for l in lines if l.startswith("size %d trial" % cell["size"])]
    assert len(mine) == 6, (cell["size"], mine)
    exact = sum(" | exact (" in l for l in mine)
    right = sum(int(re.search(r"\((\d+)/(\d+) answer", l).group(1)) for l in mine)
    total = sum(int(re.search(r"\((\d+)/(\d+) answer", l).group(2)) for l in mine)
    assert exact == round(cell["accuracy"] * 6), (exact, cell)
    assert abs(right / total - cell["token_accuracy"]) < 1e-9, (right, total, cell)
    for l in mine:   # the expected answer is the prompt's symbols copied, then "."
        prompt = l.split(":", 1)[1].split("|")[0].split()
        expected = l.split("| expected")[1].split("|")[0].split()
        assert expected == prompt[:-1] + ["."], l
PYEOF
# --show of an interleaved task (MQAR): the queries after the first answer are listed with
# the answers' places, so every shown instance reads back whole (probe 29)
cat > mq.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "mqar", "min_size": 1, "max_size": 4, "symbols": 16, "pack": true}},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 40, "steps": 2, "threads": 1, "schedule": {"warmup": 1}}}
EOF2
expect_rc 0 "train mqar" "$BIN" train mq.json --out mq --quiet
expect_rc 0 "eval mqar --show" "$BIN" eval mq --task --sizes 3 --trials 4 --show 4 --quiet
"$PY" - out.txt <<'PYEOF' && ok || bad "MQAR --show lines do not give the whole instance: $(grep '^size' out.txt)"
import sys
lines = [l for l in open(sys.argv[1]) if l.startswith("size 3 trial")]
assert len(lines) == 4, lines
for l in lines:
    prompt = l.split(":", 1)[1].split("| expected")[0].split()
    expected = l.split("| expected")[1].split("|")[0].split()
    bar = prompt.index("|")
    pairs = dict(zip(prompt[:bar:2], prompt[1:bar:2]))
    queries = [t for t in prompt[bar + 1:] if t != "[?]"]
    assert len(pairs) == 3 and len(queries) == 3 and prompt.count("[?]") == 2, l
    assert [pairs[q] for q in queries] == expected, l   # each answer the value of its query's key
PYEOF
# a sweep of an MQAR run: the default scales keep the sizes MQAR makes (as eval --task),
# given ones it cannot make are refused before any training (probe 29)
cat > swmq.json <<'EOF2'
{"base": "mq.json", "variants": [{"name": "a"}], "eval": {"lengths": [40], "task_trials": 2}, "out": "swmq"}
EOF2
expect_rc 0 "sweep of an MQAR run, default task scales" "$BIN" sweep swmq.json --quiet
expect_err "a: default scale 32x left out"
sed 's/"task_trials": 2/"task_trials": 2, "task_scales": [1, 8]/; s/"swmq"/"swmq2"/' swmq.json > swmq2.json
expect_rc 2 "sweep with task scales MQAR cannot make" "$BIN" sweep swmq2.json --quiet
expect_err "swmq2.json: point a: eval.task_scales: size 32 is outside what mqar makes"
[ ! -e swmq2/a ] && ok || bad "the refused sweep trained"
# depths for a sweep whose points have no depth grid: refused as on the command line (probe 33)
sed 's/"task_trials": 2/"task_trials": 2, "task_depths": [0, 1]/; s/"swmq"/"swmq3"/' swmq.json > swmq3.json
expect_rc 2 "task_depths without a needle task" "$BIN" sweep swmq3.json --dry-run
expect_err "swmq3.json: eval.task_depths: applies to needle tasks (passkey, multikey, vartrack)"
# a checkpoint's task report carries its name: the run's own report stays (probe 29)
cp run/eval_task_copy.json before_ckpt.json
ck=$(cat run/checkpoints/latest)
expect_rc 0 "eval --task of a checkpoint" "$BIN" eval "run/checkpoints/$ck" --task --sizes 2 --trials 3 --quiet
[ -f "run/eval_task_copy_${ck%.ckpt}.json" ] && cmp -s before_ckpt.json run/eval_task_copy.json && ok \
    || { bad "a checkpoint's task report replaced the run's"; ls run; }
expect_rc 2 "eval --show x" "$BIN" eval run --task --show x
expect_msg "--show 'x': expected an integer in \\[0, 1000\\]"
[ -f run/eval_task_copy_sinks_1_window_6.json ] && ok || { bad "transformed report name"; ls run; }
expect_rc 0 "generate" "$BIN" generate run --prompt "a b c d =" --tokens 5 --temperature 0 --seed 1
expect_out "a b c d = a b c d ."

# resume: the rows are a function of (seed, window index)
sed 's/"steps": 3500/"steps": 20/; s/"checkpoint_every": 3500/"checkpoint_every": 10/; s/"log_every": 100/"log_every": 1/; s/"warmup": 50/"warmup": 2/' cfg.json > short.json
expect_rc 0 "train 20 steps" "$BIN" train short.json --out s1 --quiet
expect_rc 0 "train to step 10" "$BIN" train short.json --out s2 --quiet --stop-after 10
expect_rc 0 "resume" "$BIN" train --resume s2 --quiet
[ "$(trace s1)" = "$(trace s2)" ] && [ "$(trace s1 | wc -l)" = 20 ] && ok || bad "resumed trace differs"
expect_rc 0 "loss all" "$BIN" train short.json --out all --quiet --set data.task.loss=all
[ "$(trace s1 | sed -n 3p)" != "$(trace all | sed -n 3p)" ] && ok || bad "data.task.loss changes nothing"

# per-instance mask of packed rows: trains, resumes bit-exactly, and moves the loss
expect_rc 0 "packed" "$BIN" train short.json --out pk --quiet --set data.task.pack=true
expect_rc 0 "packed + doc_mask" "$BIN" train short.json --out dm1 --quiet --set data.task.pack=true --set data.task.doc_mask=true
expect_rc 0 "doc_mask to step 10" "$BIN" train short.json --out dm2 --quiet --stop-after 10 --set data.task.pack=true --set data.task.doc_mask=true
expect_rc 0 "doc_mask resume" "$BIN" train --resume dm2 --quiet
[ "$(trace dm1)" = "$(trace dm2)" ] && ok || bad "doc_mask: resumed trace differs"
[ "$(trace pk | sed -n 1p)" != "$(trace dm1 | sed -n 1p)" ] && ok || bad "data.task.doc_mask changes nothing"
grep -q '"doc_mask": true' dm1/config.json && ok || bad "doc_mask not in the run's config"

# bad input: exit 2 naming the key, nothing written
expect_rc 2 "doc_mask without pack" "$BIN" train short.json --out b7 --quiet --set data.task.doc_mask=true
expect_err "data.task.doc_mask: masks attention between the instances of a packed row"
expect_rc 2 "doc_mask with cope" "$BIN" train short.json --out b8 --quiet --set data.task.pack=true --set data.task.doc_mask=true --set model.pos=cope
expect_err "data.task.doc_mask: not available with model.pos \"cope\""
[ ! -e b7 ] && [ ! -e b8 ] && ok || bad "a refused doc_mask run wrote its directory"
expect_rc 2 "unknown task" "$BIN" train short.json --out b1 --quiet --set data.task.name=nope
expect_err "data.task.name"
expect_rc 2 "min > max" "$BIN" train short.json --out b2 --quiet --set data.task.min_size=5
expect_err "data.task.max_size"
expect_rc 2 "mqar: more pairs than key symbols" "$BIN" train short.json --out b3 --quiet --set data.task.name=mqar --set data.task.max_size=3
expect_err "data.task.max_size"
expect_rc 2 "a key of another task" "$BIN" train short.json --out b4 --quiet --set data.task.format=reversed
expect_err "data.task.format: applies to the task addition"
expect_rc 2 "instance longer than seq_len + 1" "$BIN" train short.json --out b5 --quiet --set data.task.max_size=5
expect_err "data.task.max_size: a copy instance of size 5 has 12 tokens"
echo "some text for a text run" > corpus.txt
expect_rc 2 "task key on a text source" "$BIN" train short.json --out b6 --quiet --set data.source=text \
    --set data.path=corpus.txt --set data.tokenizer=byte
expect_err "applies to data.source \"task\" (this run's source is \"text\")"
for d in b1 b2 b3 b4 b5 b6; do [ ! -e "$d" ] && ok || bad "$d written for a refused config"; done

ls run > before.txt
expect_rc 4 "--task of another task" "$BIN" eval run --task reverse
expect_err "trained on the copy task"
expect_rc 2 "unknown task name" "$BIN" eval run --task bogus
expect_err "unknown task"
expect_rc 2 "--depths on copy" "$BIN" eval run --task --depths 0.5
expect_err "--depths: applies to needle tasks"
expect_rc 2 "depth outside [0, 1]" "$BIN" eval run --task --depths 0,1.5
expect_err "--depths '0,1.5'"
expect_rc 2 "--data on a task run" "$BIN" eval run --data corpus.txt
expect_err "evaluate it with --task"
expect_rc 2 "--lengths on a task run" "$BIN" eval run --task --lengths 10
expect_err "--lengths: applies to a text run"
expect_rc 2 "size 0" "$BIN" eval run --task --sizes 0
expect_err "--sizes"
ls run | cmp -s - before.txt && ok || bad "a refused eval wrote into the run"

# a sweep of task runs: the accuracy table and task_results.csv
cat > sweep.json <<'EOF2'
{"base": "short.json", "set": {"train.steps": 10, "train.log_every": 5},
 "variants": [{"name": "alibi", "model.pos": "alibi"}, {"name": "pk", "model.pos": "rope",
              "data.task.name": "passkey", "data.task.min_size": 7, "data.task.max_size": 8,
              "train.seq_len": 13}],
 "eval": {"lengths": [10], "task_scales": [1, 2], "task_trials": 3, "task_depths": [0, 1]},
 "out": "sw"}
EOF2
expect_rc 0 "sweep" "$BIN" sweep sweep.json --quiet
grep -q "## Task accuracy" sw/results.md && grep -qE '^\| alibi \| alibi \| copy \| 1\.\.4 \|' sw/results.md && ok \
    || { bad "results.md task table"; cat sw/results.md; }
[ "$(grep -c '^pk,' sw/task_results.csv)" = 4 ] && [ "$(grep -c '^alibi,' sw/task_results.csv)" = 2 ] && ok \
    || { bad "task_results.csv rows"; cat sw/task_results.csv; }
"$PY" - sw/results.json <<'EOF2' && ok || bad "results.json task objects"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
t = {r["name"]: r["task"] for r in runs}
assert t["alibi"]["name"] == "copy" and t["pk"]["name"] == "passkey", t
assert [x["depth"] for x in t["pk"]["results"]] == [0, 1, 0, 1], t["pk"]
EOF2

# two scales that round to one size (1 and 1.1 of a largest size of 4) are one evaluation,
# shown under both columns; the later columns keep their own sizes (probe 44: each value
# from the second column on sat one column early, and the last was n/a)
sed 's/"task_scales": \[1, 2\]/"task_scales": [1, 1.1, 2]/; s/"out": "sw"/"out": "swr"/' sweep.json > swr.json
expect_rc 0 "sweep, two scales of one size" "$BIN" sweep swr.json --quiet
[ "$(grep -c '^alibi,' swr/task_results.csv)" = 2 ] && ok || { bad "task_results.csv: a size twice"; cat swr/task_results.csv; }
"$PY" - swr/results.json swr/results.md <<'EOF2' && ok || bad "columns of two scales of one size"
import json, sys
t = {r["name"]: r["task"] for r in json.load(open(sys.argv[1]))["runs"]}["alibi"]
assert t["column_sizes"] == [4, 4, 8], t["column_sizes"]
acc = {r["size"]: r["correct"] / r["trials"] for r in t["results"]}
row = [l for l in open(sys.argv[2]) if l.startswith("| alibi | alibi | copy |")][0]
cells = [c.strip() for c in row.strip().strip("|").split("|")][4:]
assert cells == ["%.2f" % acc[4], "%.2f" % acc[4], "%.2f" % acc[8]], (cells, acc)
EOF2
sed 's/"task_scales": \[1, 2\]/"task_scales": [1, 2, 1]/' sweep.json > swd.json
expect_rc 2 "sweep, a repeated scale" "$BIN" sweep swd.json --quiet --dry-run
expect_err "swd.json: eval.task_scales\[2\]: 1 repeats eval.task_scales\[0\]"
sed 's/"task_depths": \[0, 1\]/"task_depths": [0.5, 0.5]/' sweep.json > swd2.json
expect_rc 2 "sweep, a repeated depth" "$BIN" sweep swd2.json --quiet --dry-run
expect_err "eval.task_depths\[1\]: 0.5 repeats"
finish cli_task
