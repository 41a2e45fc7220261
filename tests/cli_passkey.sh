#!/usr/bin/env bash
# cli_passkey.sh - passkey retrieval in real text end to end: a byte-level run trained with
# data.passkey.rate, `stretch eval RUN --task passkey` prints the length x depth grid and
# writes its JSON (one row per cell, accuracy in [0, 1], the transform's label in the
# name when one is given), a resumed run draws the same passkey windows (bit-exact trace),
# and bad input is refused with the documented exit code naming the key or flag: unknown
# task, a depth outside [0, 1], a synthetic run (no text), passkeys on a synthetic source,
# a training window too short for an instance, --task under another option set.
. "$(dirname "$0")/lib_cli.sh" cli_passkey

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7)) and runs away"; done > corpus.txt
cat > cfg.json <<'EOF2'
{"model": {"n_layers": 1, "d_model": 32, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1,
          "passkey": {"rate": 0.5, "digits": 4}},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 48, "steps": 10, "eval_every": 5, "eval_batches": 1,
           "log_every": 1, "checkpoint_every": 5, "schedule": {"warmup": 2}},
 "eval": {"lengths": [48, 96]}}
EOF2
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

expect_rc 0 "train with passkeys" "$BIN" train cfg.json --out run --quiet
expect_rc 0 "train to step 5" "$BIN" train cfg.json --out run-r --quiet --stop-after 5
expect_rc 0 "resume" "$BIN" train --resume run-r --quiet
[ "$(trace run)" = "$(trace run-r)" ] && [ "$(trace run | wc -l)" = 10 ] && ok || bad "resumed trace differs"
expect_rc 0 "train without passkeys" "$BIN" train cfg.json --out plain --quiet --set data.passkey.rate=0
[ "$(trace run | sed -n 3p)" != "$(trace plain | sed -n 3p)" ] && ok || bad "data.passkey.rate changes nothing"

expect_rc 0 "eval --task passkey" "$BIN" eval run --task passkey --lengths 48,96,192 --depths 0,0.5,1 --trials 3
expect_out "passkey retrieval: 4-digit keys, 3 trials per cell"
expect_out "d=0.50"
[ "$(grep -cE '^ +(48|96|192) ' out.txt)" = 3 ] && ok || { bad "grid rows"; cat out.txt; }
"$PY" - run/eval_valid_passkey.json <<'EOF2' && ok || bad "passkey report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["task"] == "passkey" and r["digits"] == 4 and r["trials"] == 3 and r["train_len"] == 48, r
rows = r["results"]
assert [(x["length"], x["depth"]) for x in rows] == [(n, d) for n in (48, 96, 192) for d in (0, 0.5, 1)], rows
for x in rows:
    assert x["trials"] == 3 and 0 <= x["correct"] <= 3 and x["accuracy"] == x["correct"] / 3 and x["answer_loss"] > 0, x
    # digits right (teacher forced), of 3 x 4: every digit right in a correct trial
    assert x["accuracy"] <= x["token_accuracy"] <= 1 and round(x["token_accuracy"] * 12) == x["token_accuracy"] * 12, x
EOF2
cp run/eval_valid_passkey.json first.json
expect_rc 0 "eval again, same seed" "$BIN" eval run --task passkey --lengths 48,96,192 --depths 0,0.5,1 --trials 3 --quiet
cmp -s first.json run/eval_valid_passkey.json && ok || bad "the same seed gives another report"
expect_rc 0 "eval with a window" "$BIN" eval run --task passkey --lengths 96 --trials 2 --sinks 2 --window 16 --quiet
expect_rc 2 "eval --task passkey --show" "$BIN" eval run --task passkey --show 2
expect_msg "--show: shows a task run's instances"
# the doubling range of the README's example (48..192 = 48, 96, 192), as eval takes it
expect_rc 0 "eval --task passkey --lengths 48..192" "$BIN" eval run --task passkey --lengths 48..192 --depths 0 --trials 1 --json range.json
/usr/bin/python3 -c "import json; r=json.load(open('range.json')); s=sorted({x['length'] for x in r['results']}); assert s==[48,96,192], s" &&
    ok || bad "--lengths 48..192: $(head -c 300 range.json)"
[ -f run/eval_valid_passkey_sinks_2_window_16.json ] && ok || { bad "transformed report name"; ls run; }

expect_rc 2 "unknown task" "$BIN" eval run --task bogus
expect_err "--task 'bogus': unknown task"
expect_rc 2 "depth 1.5" "$BIN" eval run --task passkey --depths 0,1.5
expect_err "--depths '0,1.5'"
expect_rc 2 "perplexity option with --task" "$BIN" eval run --task passkey --mode sliding
expect_err "does not apply to task evaluation"
sed 's/"source": "text", "path": "corpus.txt", "tokenizer": "byte",/"source": "synthetic",/; s/"passkey": {"rate": 0.5, "digits": 4}/"synthetic": {"vocab": 16, "tokens": [20000, 2000, 2000]}/' \
    cfg.json > syn.json
expect_rc 0 "synthetic run" "$BIN" train syn.json --out syn --quiet
expect_rc 4 "passkey eval of a synthetic run" "$BIN" eval syn --task passkey
expect_err 'or a text run (passkey)'
expect_rc 2 "passkeys on a synthetic source" "$BIN" train syn.json --out bad1 --quiet --set data.passkey.rate=0.5
expect_err "data.passkey.rate"
expect_rc 2 "window too short" "$BIN" train cfg.json --out bad2 --quiet --set train.seq_len=16 --set eval.lengths=[16]
expect_err "data.passkey.rate: an instance needs 29 tokens"
expect_rc 2 "digits 0" "$BIN" train cfg.json --out bad3 --quiet --set data.passkey.digits=0
expect_err "data.passkey.digits"
for d in bad1 bad2 bad3; do [ ! -e "$d" ] && ok || bad "$d written for a refused config"; done
# a sweep of text runs with passkeys: retrieval beside perplexity, at task_scales x
# train.seq_len, in the task table, task_results.csv and results.json (a run without
# passkeys gets none); scales 1 and 1.01 give one length (48), evaluated once and shown
# under both columns
cat > sweep.json <<'EOF2'
{"base": "cfg.json", "set": {"train.steps": 6},
 "variants": [{"name": "pk-alibi", "model.pos": "alibi"}, {"name": "plain", "data.passkey.rate": 0}],
 "eval": {"lengths": [48, 96], "task_scales": [1, 1.01, 2], "task_trials": 2, "task_depths": [0, 1]},
 "out": "sw"}
EOF2
expect_rc 0 "sweep with passkeys" "$BIN" sweep sweep.json --quiet
grep -qE '^\| pk-alibi \| alibi \| passkey \| 48\.\.48 \|' sw/results.md && ! grep -qE '^\| plain \|.*passkey' sw/results.md \
    && ok || { bad "results.md passkey row"; cat sw/results.md; }
[ "$(grep -c '^pk-alibi,' sw/task_results.csv)" = 4 ] && ! grep -q '^plain,' sw/task_results.csv && ok \
    || { bad "task_results.csv rows"; cat sw/task_results.csv; }
"$PY" - sw/results.json sw/results.md <<'EOF2' && ok || bad "results.json passkey object"
import json, sys
runs = {r["name"]: r for r in json.load(open(sys.argv[1]))["runs"]}
t = runs["pk-alibi"]["task"]
assert t["name"] == "passkey" and t["train_max_size"] == 48 and "task" not in runs["plain"], runs
rows = t["results"]
assert [(x["size"], x["scale"], x["depth"]) for x in rows] == [(48, 1, 0), (48, 1, 1), (96, 2, 0), (96, 2, 1)], rows
for x in rows:
    assert x["trials"] == 2 and 0 <= x["correct"] <= 2 and x["accuracy"] == x["correct"] / 2 and x["answer_loss"] > 0, x
    assert x["accuracy"] <= x["token_accuracy"] <= 1, x
assert t["column_sizes"] == [48, 48, 96], t["column_sizes"]
acc = {n: sum(x["correct"] for x in rows if x["size"] == n) / 4 for n in (48, 96)}
row = [l for l in open(sys.argv[2]) if l.startswith("| pk-alibi | alibi | passkey |")][0]
cells = [c.strip() for c in row.strip().strip("|").split("|")][4:]
assert cells == ["%.2f" % acc[48], "%.2f" % acc[48], "%.2f" % acc[96]], (cells, acc)
EOF2

finish cli_passkey
