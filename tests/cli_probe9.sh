#!/usr/bin/env bash
# cli_probe9.sh - the findings of the ninth round of black-box probes (help texts against
# behaviour, resource limits, a researcher's end-to-end workflow) that are not checked
# beside their feature's own tests:
#   - plot.py (and results_tables.py) labelled eval reports of runs on two data sets with
#     every field that differed: "alibi [data bytes_exact=True,bytes_per_token=1,
#     changed_since_training=False,hash=...,source=text,tokenizer=byte,unit=byte, params
#     116480, split_tokens 8192, step 30, vocab_size 256]"; the legend was wider than the
#     figure and tight_layout squeezed the axes to a sliver at its left edge (two methods
#     on tinyshakespeare and WikiText-2: nothing readable). A label names the fewest fields
#     that tell the runs apart, what was chosen before what follows from it, and of the
#     data its fields that differ: "alibi [data source=text]", "alibi [data source=synthetic]";
#     the split and mode whenever they differ, even where another field tells the runs apart
#     (the title lists the modes joined: each line says which is its own).
#   - a sweep's results.md said "Evaluation: valid split, ..." of a sweep whose
#     eval.max_tokens scored 4,096 of the split's 55,780 bytes (most shipped results sweeps
#     set max_tokens), and a variant with another eval.max_tokens read as the header's: the
#     header says "the first N of M bytes of the valid split (eval.max_tokens)", such a row
#     "[N bytes]" in its pos column.
#   - range errors that named a rule the value keeps: extend --batch 2000000 "integer >= 1
#     expected" (the bound is train.batch_size's 2^20), --steps / --warmup 2e12 ">= 0"
#     (1e12), eval --task --threads 5000 ">= 0" (4096, as eval's own --threads says).
#   - bench had no memory bound: its arenas had no cap, so --preset tiny --batch 65536 --seq
#     1024 asked for a 16 GiB chunk at once (under a 4 GB address-space limit: "arena
#     overflow: needed 17179869376 bytes, ... (no limit set)"; without one, on this 23 GiB
#     machine, the chunk is granted and written, the OOM killer's business where less is
#     free), naming no flag; --eval-batch 1048576 --eval 16777216 asked malloc for 128 TiB.
#     Shapes whose token ids and kept attention probabilities alone pass 90% of memory are
#     refused up front (exit 6, naming the flags), and the arenas are capped there.
#   - extend --to 1024 --batch 1048576 was refused for memory (exit 6) with "a training step
#     of train.batch_size 1048576 x train.seq_len 1024 tokens needs about 44813 GiB ... (lower
#     train.batch_size or train.seq_len)", keys the user did not write: it names --to and
#     --batch now, as extend's config errors name the flags that set their keys.
#   - data --help's --config line listed --save-tokenizer FILE without the --force it takes.
#   - generate --help gave --scale's default as context / train.seq_len; it is
#     max(1, context / train.seq_len), as docs/evaluation.md says.
. "$(dirname "$0")/lib_cli.sh" cli_probe9
# The refusals below come before any large allocation; a 4 GB address-space limit makes a
# build without them fail fast instead of filling memory. Not for an ASan build, whose
# shadow memory alone reserves terabytes of address space.
if nm -u "$BIN" 2>/dev/null | grep -q '__asan_'; then VLIMIT=unlimited; else VLIMIT=4000000; fi

# ---- plot labels of eval reports on two data sets ----
tiny_text_run alibi
tiny_synthetic_cfg syn.json
expect_rc 0 "train text" "$BIN" train cfg.json --out r_text --quiet
expect_rc 0 "train synthetic" "$BIN" train syn.json --out r_syn --quiet --set model.pos=alibi
expect_rc 0 "eval text" "$BIN" eval r_text --lengths 16,32 --quiet
expect_rc 0 "eval synthetic" "$BIN" eval r_syn --lengths 16,32 --quiet
if "$PY" -c "import matplotlib" 2>/dev/null; then
    # the line names are listed by an --only that names none of them
    expect_rc 2 "plot of two data sets' reports" "$PY" "$SRC/scripts/plot.py" r_text/eval_valid_nonoverlapping.json \
        r_syn/eval_valid_nonoverlapping.json --only x -o p.png
    expect_err "have: alibi \[data source=text\], alibi \[data source=synthetic\])"
    grep -q 'params\|vocab_size\|hash=' err.txt && bad "a label names what follows from the data: $(cat err.txt)" || ok
    expect_rc 0 "the plot" "$PY" "$SRC/scripts/plot.py" r_text/eval_valid_nonoverlapping.json \
        r_syn/eval_valid_nonoverlapping.json -o p.png
else
    skip "plot.py (no matplotlib)"
fi
# the rule itself, without matplotlib: one field that tells the runs apart is enough
"$PY" - "$SRC/scripts" <<'EOF' && ok || bad "labels of two data sets' reports"
import json, sys
sys.path.insert(0, sys.argv[1])
from sweep_json import report_key, split_labels
a = json.load(open("r_text/eval_valid_nonoverlapping.json"))
b = json.load(open("r_syn/eval_valid_nonoverlapping.json"))
runs = [{"label": "alibi", "key": report_key(d)} for d in (a, b)]
split_labels(runs)
assert [r["label"] for r in runs] == ["alibi [data source=text]", "alibi [data source=synthetic]"], runs
# the same data, another protocol: the protocol alone
c = dict(a, mode="sliding", stride=16)
runs = [{"label": "alibi", "key": report_key(d)} for d in (a, c)]
split_labels(runs)
assert [r["label"] for r in runs] == ["alibi [mode nonoverlapping]", "alibi [mode sliding]"], runs
# the data, and the protocol whenever it differs (the title lists the modes joined), though
# the data alone tells these two apart
d = dict(b, mode="sliding", stride=16)
runs = [{"label": "alibi", "key": report_key(x)} for x in (a, d)]
split_labels(runs)
assert [r["label"] for r in runs] == ["alibi [data source=text, mode nonoverlapping]",
                                      "alibi [data source=synthetic, mode sliding]"], runs
EOF

# ---- results.md: the part of the split eval.max_tokens scored ----
cat > swmt.json <<'EOF2'
{"base": "cfg.json", "set": {"train.steps": 2, "train.eval_every": 2, "train.schedule.warmup": 0},
 "variants": [{"name": "a", "model.pos": "alibi"}, {"name": "a-full", "model.pos": "alibi", "eval.max_tokens": 0}],
 "eval": {"lengths": [16], "max_tokens": 300}, "out": "swmt"}
EOF2
expect_rc 0 "sweep with eval.max_tokens" "$BIN" sweep swmt.json --quiet
whole=$("$PY" -c "import json; print(json.load(open('swmt/a/eval_valid_nonoverlapping.json'))['split_total'])")
grep -q "^Evaluation: the first 300 of $whole bytes of the valid split (eval.max_tokens), nonoverlapping" swmt/results.md && ok \
    || bad "results.md does not say eval.max_tokens cut the split: $(grep Evaluation swmt/results.md)"
full=$("$PY" -c "import json; print(json.load(open('swmt/a-full/eval_valid_nonoverlapping.json'))['split_tokens'])")
grep -q "^| a-full | alibi \[$full bytes\] |" swmt/results.md && ok || bad "the full split's row: $(grep a-full swmt/results.md)"
grep -q '^| a | alibi |' swmt/results.md && ok || bad "the header's row: $(grep '^| a |' swmt/results.md)"

# ---- range errors state the range ----
expect_rc 2 "extend --batch past 2^20" "$BIN" extend r_text --to 64 --steps 1 --batch 2000000
expect_err "--batch '2000000': integer in \[1, 1048576\]"
expect_rc 2 "extend --steps past 1e12" "$BIN" extend r_text --to 64 --steps 2000000000000
expect_err "--steps '2000000000000': integer in \[0, 1e12\]"
expect_rc 2 "extend --warmup past 1e12" "$BIN" extend r_text --to 64 --steps 1 --warmup 2000000000000
expect_err "--warmup '2000000000000': integer in \[0, 1e12\]"
expect_rc 2 "eval --task --threads past 4096" "$BIN" eval r_text --task passkey --threads 5000
expect_err "--threads '5000': expected an integer in \[0, 4096\]"

# ---- extend: a step too large for memory names the flags that sized it ----
(ulimit -v $VLIMIT; "$BIN" extend r_text --to 1024 --steps 1 --batch 1048576 --out ext_big >out.txt 2>err.txt); rc=$?
[ $rc = 6 ] && ok || bad "extend --to 1024 --batch 1048576: exit $rc, expected 6"
expect_err "error: --to, --batch: a training step of train.batch_size 1048576 x train.seq_len 1024"
[ ! -e ext_big ] && ok || bad "extend made ext_big for a refused step"

# ---- data --help: --save-tokenizer's --force on both lines ----
expect_rc 0 "data --help" "$BIN" data --help
[ "$(grep -c -- '--save-tokenizer FILE \[--force\]' out.txt)" = 2 ] && ok || bad "data --help: $(grep save-tok out.txt)"

# ---- generate --help: --scale's default ----
expect_rc 0 "generate --help" "$BIN" generate --help
expect_out "default max(1, context / train.seq_len)"

# ---- bench: shapes past the machine are refused before anything is allocated ----
(ulimit -v $VLIMIT; "$BIN" bench --preset tiny --batch 65536 --seq 1024 --sgemm 0 --no-eval --threads 1 --steps 1 \
    >out.txt 2>err.txt); rc=$?
[ $rc = 6 ] && ok || bad "bench --batch 65536 --seq 1024: exit $rc, expected 6"
expect_err "--batch 65536 x --seq 1024: a training step keeps at least"
(ulimit -v $VLIMIT; "$BIN" bench --preset tiny --eval-batch 1048576 --eval 16777216 --sgemm 0 --no-train --threads 1 \
    >out.txt 2>err.txt); rc=$?
[ $rc = 6 ] && ok || bad "bench --eval-batch 1048576 --eval 16777216: exit $rc, expected 6"
expect_err "--eval-batch 1048576 x --eval length 16777216: the token ids alone need"

finish cli_probe9
