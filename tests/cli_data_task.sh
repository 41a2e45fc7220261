#!/usr/bin/env bash
# cli_data_task.sh - `stretch data --config RUN.json` of task runs: the rows the trainer
# draws and instances of one size, checked against each task's definition (docs/tasks.md)
# by an independent reading of the printed tokens: copy's answer is its prompt, addition's
# the sum (reversed digits), MQAR's the queried keys' values, passkey's the needle's digits,
# multikey's the digits of the needle under the queried key (its keys distinct), counting's
# the count, parity's the sum mod 2, vartrack's the chain of variables holding the asked
# value (variables distinct, each copy's source assigned before it);
# the brackets are exactly the scored tokens, rows hold train.seq_len + 1 tokens, packing
# fills them, the rows follow train.seed; and the flag errors.
. "$(dirname "$0")/lib_cli.sh" cli_data_task

cat > copy.json <<'EOF'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "copy", "symbols": 8, "min_size": 1, "max_size": 8}},
 "train": {"batch_size": 4, "seq_len": 40, "steps": 200, "seed": 5}}
EOF

# CHECK: python reads the rows ("row N: ..." then one indented line per instance) and
# checks each instance against its task (argv: task name, T + 1, packed 0/1)
check_rows() {
    "$PY" - "$@" out.txt <<'PY'
import os, re, sys
task, n, packed, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows, cur = [], None
for line in open(path):
    m = re.match(r"row (\d+): (\d+) instances?, (\d+) of (\d+) tokens, (\d+) scored", line)
    if m:
        cur = {"head": [int(g) for g in m.groups()], "lines": []}
        rows.append(cur)
    elif cur is not None and line.startswith("  "):
        cur["lines"].append(line.strip())
assert rows, "no rows"
def tokens(s):  # [(token, scored)]
    out, inside = [], False
    for t in s.split():
        if t.startswith("["): inside, t = True, t[1:]
        end = t.endswith("]")
        if end: t = t[:-1]
        out.append((t, inside))
        if end: inside = False
    return out
def check(inst):
    toks = [t for t, _ in inst]; sc = [s for _, s in inst]
    if task == "copy":
        k = toks.index("=")
        assert toks[k + 1:] == toks[:k] + ["."], inst
        assert sc == [False] * (k + 1) + [True] * (k + 1), inst   # the answer and its "."
    elif task == "addition":   # reversed: least significant digit first
        k, p = toks.index("="), toks.index("+")
        a, b = int("".join(toks[:p])[::-1]), int("".join(toks[p + 1:k])[::-1])
        assert toks[-1] == "." and int("".join(toks[k + 1:-1])[::-1]) == a + b, inst
        assert sc == [False] * (k + 1) + [True] * (len(toks) - k - 1), inst
    elif task == "mqar":
        k = toks.index("|")
        kv = dict(zip(toks[:k:2], toks[1:k:2]))
        q = toks[k + 1:]
        assert all(kv[q[i]] == q[i + 1] for i in range(0, len(q), 2)), inst
        assert sc[k + 1:] == [i % 2 == 1 for i in range(len(q))] and not any(sc[:k + 1]), inst
    elif task == "passkey":
        k, q = toks.index("K"), toks.index("?")
        d = len(toks) - q - 1
        assert toks[q + 1:] == toks[k + 1:k + 1 + d] and sc == [False] * (q + 1) + [True] * d, inst
    elif task == "multikey":
        q = toks.index("?")
        d = len(toks) - q - 2
        keys = [toks[i + 1] for i in range(q) if toks[i] == "K"]
        assert len(keys) == 4 and len(set(keys)) == 4 and toks[q + 1] in keys, inst
        at = [i for i in range(q) if toks[i] == "K" and toks[i + 1] == toks[q + 1]][0]
        assert toks[q + 2:] == toks[at + 2:at + 2 + d] and sc == [False] * (q + 2) + [True] * d, inst
    elif task == "counting":
        q = toks.index("?")
        assert toks[q + 2] == "=" and toks[-1] == ".", inst
        assert int("".join(toks[q + 3:-1])) == toks[:q].count(toks[q + 1]) >= 1, inst
        maxc = int(os.environ.get("MAX_COUNT", "0"))   # data.task.max_count: counts bounded
        assert maxc == 0 or int("".join(toks[q + 3:-1])) <= maxc, inst
        assert sc == [False] * (q + 3) + [True] * (len(toks) - q - 3), inst
    elif task == "vartrack":   # `K x d d` values, `K y x` copies, `? d d`, the chain, `.`
        q = toks.index("?")
        e = q + 3   # two digits
        val = toks[q + 1:e]
        assert all(t.isdigit() for t in val) and not toks[e].isdigit(), inst
        assign = [(toks[i + 1], toks[i + 2:i + 2 + len(val)] if toks[i + 2].isdigit() else toks[i + 2])
                  for i in range(q) if toks[i] == "K"]
        dst = [a for a, _ in assign]
        assert len(dst) == 3 * 2 and len(set(dst)) == len(dst), inst   # hops 3 x chains 2, distinct
        for j, (a, src) in enumerate(assign):   # a copy's source was assigned before it
            assert isinstance(src, list) or src in dst[:j], inst
        chain = [a for a, src in assign if src == val]
        assert len(chain) == 1, inst
        while len(chain) < 3:
            chain += [a for a, src in assign if src == chain[-1]]
        assert toks[e:] == chain + ["."] and sc == [False] * e + [True] * 4, inst
    elif task == "parity":
        assert toks[-2] == "=" and set(toks[:-2]) <= {"0", "1"} and int(toks[-1]) == toks[:-2].count("1") % 2, inst
        assert sc == [False] * (len(toks) - 1) + [True], inst
for r in rows:
    _, n_inst, used, total, scored = r["head"]
    assert total == n, (total, n)
    insts = [tokens(l) for l in r["lines"]]
    pad = [i for i in insts if i[0][0] == "<pad>"]
    real = [i for i in insts if i[0][0] != "<pad>"]
    assert len(real) == n_inst and (packed or n_inst == 1), r
    assert sum(len(i) for i in real) == used, r
    npad = sum(int(i[1][0][1:]) if len(i) > 1 else 1 for i in pad)
    assert used + npad == n, (used, npad, n)
    assert sum(s for i in real for _, s in i) == scored, r
    for i in real: check(i)
    if packed: assert n - used < 10, r   # a packed row is filled (instances here are short)
print(len(rows), "rows ok")
PY
}

expect_rc 0 "copy rows" "$BIN" data --config copy.json --show 6
expect_out "^task        copy"
expect_out "^vocabulary  29 ids: 11 specials, 10 digits, 8 symbols (a .. h)"
expect_out "the first 6 the trainer draws (train.seed 5; step 1 takes 4, rows 0..3), train.seq_len + 1 = 41 tokens"
check_rows copy 41 0 && ok || bad "copy rows"
cp out.txt copy1.txt
expect_rc 0 "copy rows again" "$BIN" data --config copy.json --show 6
cmp -s out.txt copy1.txt && ok || bad "the rows are not a function of the config"
expect_rc 0 "another seed" "$BIN" data --config copy.json --show 6 --set train.seed=6
cmp -s out.txt copy1.txt && bad "train.seed does not change the rows" || ok
# the loss-all variant scores the prompt too
expect_rc 0 "loss all" "$BIN" data --config copy.json --show 2 --set data.task.loss=all
expect_out "loss on every token but padding"
"$PY" -c '
import re
rows = [l for l in open("out.txt") if l.startswith("  ") and "<pad>" not in l]
assert rows and all(l.strip().startswith(l.strip().split()[0]) and l.count("[") == 1 for l in rows), rows
assert all(re.match(r"\S+ \[", l.strip()) for l in rows), rows   # all but the first token scored' && ok || bad "loss all brackets"

# packed addition rows, MQAR and passkey rows, each instance checked
sed 's/"symbols": 8, //' copy.json > add.json
expect_rc 0 "addition packed" "$BIN" data --config add.json --show 5 --set data.task.name=addition \
    --set data.task.format=reversed --set data.task.min_size=1 --set data.task.max_size=3 --set data.task.pack=true
check_rows addition 41 1 && ok || bad "addition rows"
expect_rc 0 "mqar" "$BIN" data --config copy.json --show 5 --set data.task.name=mqar --set data.task.symbols=32 \
    --set data.task.min_size=1 --set data.task.max_size=4 --set data.task.pack=true
check_rows mqar 41 1 && ok || bad "mqar rows"
expect_rc 0 "passkey" "$BIN" data --config copy.json --show 5 --set data.task.name=passkey --set data.task.symbols=16 \
    --set data.task.min_size=10 --set data.task.max_size=30
check_rows passkey 41 0 && ok || bad "passkey rows"
expect_rc 0 "multikey" "$BIN" data --config copy.json --show 5 --set data.task.name=multikey --set data.task.symbols=16 \
    --set data.task.digits=3 --set data.task.min_size=22 --set data.task.max_size=36
check_rows multikey 41 0 && ok || bad "multikey rows"
expect_rc 0 "counting packed" "$BIN" data --config copy.json --show 5 --set data.task.name=counting \
    --set data.task.symbols=3 --set data.task.max_size=4 --set data.task.pack=true
check_rows counting 41 1 && ok || bad "counting rows"
expect_rc 0 "counting max_count" "$BIN" data --config copy.json --show 8 --set data.task.name=counting \
    --set data.task.symbols=3 --set data.task.max_size=30 --set data.task.max_count=2
MAX_COUNT=2 check_rows counting 41 0 && ok || bad "counting max_count rows"
expect_rc 2 "max_count on another task" "$BIN" data --config copy.json --set data.task.max_count=2
expect_err "data.task.max_count: applies to the task counting, not to data.task.name \"copy\""
expect_rc 0 "parity" "$BIN" data --config add.json --show 5 --set data.task.name=parity --set data.task.max_size=30
check_rows parity 41 0 && ok || bad "parity rows"
expect_rc 0 "vartrack" "$BIN" data --config copy.json --show 5 --set data.task.name=vartrack --set data.task.symbols=16 \
    --set data.task.digits=2 --set data.task.hops=3 --set data.task.chains=2 --set data.task.min_size=26 \
    --set data.task.max_size=36
check_rows vartrack 41 0 && ok || bad "vartrack rows"
expect_rc 2 "vartrack: more variables than symbols" "$BIN" data --config copy.json --set data.task.name=vartrack \
    --set data.task.hops=3 --set data.task.chains=3 --set data.task.min_size=40 --set data.task.max_size=40
expect_err "data.task.hops x data.task.chains: 3 x 3 = 9 variables need as many distinct symbols, data.task.symbols is 8"
expect_rc 2 "vartrack: too small" "$BIN" data --config copy.json --set data.task.name=vartrack --set data.task.max_size=12
expect_err "data.task.min_size: vartrack takes sizes (tokens) in \[38, "
expect_err "(data.task.chains x (data.task.digits + 3 data.task.hops - 1) + data.task.digits + 1)"
expect_rc 2 "hops on another task" "$BIN" data --config copy.json --set data.task.hops=2
expect_err "data.task.hops: applies to the task vartrack, not to data.task.name \"copy\""
expect_rc 2 "chains out of range" "$BIN" data --config copy.json --set data.task.name=vartrack --set data.task.chains=17
expect_err "data.task.chains"
expect_rc 2 "multikey: more needles than symbols" "$BIN" data --config copy.json --set data.task.name=multikey \
    --set data.task.needles=9 --set data.task.min_size=70 --set data.task.max_size=70 --set train.seq_len=80
expect_err "data.task.needles: 9 needles need as many distinct key symbols, data.task.symbols is 8"
expect_rc 2 "multikey: too small" "$BIN" data --config copy.json --set data.task.name=multikey --set data.task.max_size=12
expect_err "data.task.min_size: multikey takes sizes (tokens) in \[30, "
expect_err "(data.task.needles x (data.task.digits + 2) + 2)"
# a --set that moves the minimum or the longest row is named, and nothing is printed before
# the error (probe 33)
expect_rc 2 "--set needles past min_size" "$BIN" data --config copy.json --set data.task.name=multikey \
    --set data.task.min_size=30 --set data.task.max_size=30 --set data.task.needles=5
expect_err "--set data.task.needles=5: data.task.min_size: multikey takes sizes (tokens) in \[37, "
expect_rc 2 "--set max_size past the row" "$BIN" data --config copy.json --set data.task.max_size=30
expect_err "^stretch data: error: --set data.task.max_size=30: data.task.max_size: a copy instance of size 30 has 62 tokens"
[ ! -s out.txt ] && ok || bad "data printed rows before the config error: $(head -2 out.txt)"

# --size: instances of one size, past the training range
expect_rc 0 "copy size 30" "$BIN" data --config copy.json --size 30 --show 3
expect_out "^instances   size 30 (symbols)"
"$PY" -c '
lines = [l for l in open("out.txt") if l.startswith("62 tokens: ")]
assert len(lines) == 3, lines
for l in lines:
    t = l.split(": ", 1)[1].replace("[", "").replace("]", "").split()
    assert len(t) == 62 and t[31:] == t[:30] + ["."], t' && ok || bad "copy instances of size 30"

# errors
expect_rc 2 "size out of range" "$BIN" data --config copy.json --size 20 --set data.task.name=mqar --set data.task.symbols=32
expect_err "--size 20: a mqar instance's size (pairs) is in \[1, 16\]"
expect_rc 2 "show 0" "$BIN" data --config copy.json --show 0
expect_err "--show: expected an integer in \[1, 10000\]"
expect_rc 2 "data flags with --config" "$BIN" data --config copy.json --source text
expect_err "--config reads the data settings from the file"
expect_rc 2 "--show without --config" "$BIN" data --source synthetic --show 2
expect_err "--show and --size need --config"
expect_rc 2 "bad --set" "$BIN" data --config copy.json --set data.task.nmae=copy
expect_err "^stretch data: error: --set data.task.nmae: unknown key"
expect_rc 2 "rows longer than train.seq_len" "$BIN" data --config copy.json --set data.task.max_size=30
expect_err "data.task.max_size: a copy instance of size 30 has 62 tokens; train.seq_len + 1 is 41"
expect_rc 3 "missing config" "$BIN" data --config nope.json
expect_err "nope.json"
echo '{"model": {"pos": "alibi"}, "data": {"source": "synthetic"}}' > syn.json
expect_rc 2 "--show on a corpus" "$BIN" data --config syn.json --show 2
expect_err "show a task run's instances; syn.json has data.source \"synthetic\""
expect_rc 0 "a corpus config's statistics" "$BIN" data --config syn.json
expect_out "ideal perplexity"

finish cli_data_task
