#!/usr/bin/env bash
# cli_eval_data.sh - `stretch eval --data`: a trained run evaluated on other text with its
# own tokenizer. Same numbers as the normal eval when --data names the run's own data
# (word, byte and BPE runs on a WikiText-style directory), a different file evaluated whole, the
# <unk> count of a word-level run on a crafted file, the JSON record of what was evaluated,
# the default report name (the run's own report is not overwritten), and the errors: a
# missing file (3), an empty or binary file (4), unseen words without <unk> (4), --split
# with a file (2), a synthetic run (2), a loose word-level checkpoint without its
# tokenizer (3), another run's tokenizer.json (4).
. "$(dirname "$0")/lib_cli.sh" cli_eval_data

mkdir wt wt_nounk
$PY - <<'EOF'
import random
random.seed(5)
words = ["the", "king", "queen", "of", "and", "to", "my", "lord", "thee", "thou", "<unk>"]
def lines(n, vocab):
    return "".join(" ".join(random.choice(vocab) for _ in range(random.randint(3, 9))) + "\n" for _ in range(n))
for d, vocab in (("wt", words), ("wt_nounk", words[:-1])):
    for split, n in (("train", 1500), ("valid", 120), ("test", 120)):
        open("%s/%s.txt" % (d, split), "w").write(lines(n, vocab))
open("other.txt", "w").write(lines(200, words[:-1]))
# crafted: 4 unseen tokens, 3 distinct words ("zz" twice), plus one literal <unk>
open("crafted.txt", "w").write("the king zz of\nyy the zz <unk>\nxx-x lord\n")
EOF
common='"train": {"seed": 1, "batch_size": 4, "seq_len": 16, "steps": 10, "eval_batches": 1, "log_every": 10, "schedule": {"warmup": 2}}, "eval": {"lengths": [8, 16, 32]}'
model='"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"}'
echo "{$model, \"data\": {\"source\": \"wikitext\", \"path\": \"$T/wt\", \"cache_dir\": \"$T/cache\"}, $common}" > word.json
echo "{$model, \"data\": {\"source\": \"wikitext\", \"path\": \"$T/wt\", \"tokenizer\": \"byte\", \"cache_dir\": \"$T/cache\"}, $common}" > byte.json
echo "{$model, \"data\": {\"source\": \"wikitext\", \"path\": \"$T/wt\", \"tokenizer\": \"bpe\", \"bpe_vocab\": 300, \"cache_dir\": \"$T/cache\"}, $common}" > bpe.json
echo "{$model, \"data\": {\"source\": \"wikitext\", \"path\": \"$T/wt_nounk\", \"cache_dir\": \"$T/cache\"}, $common}" > nounk.json
echo "{$model, \"data\": {\"source\": \"synthetic\", \"synthetic\": {\"tokens\": [5000, 500, 500]}}, $common}" > syn.json
for r in word byte bpe nounk syn; do expect_rc 0 "train $r" "$BIN" train $r.json --out $r; done

# --- --data = the run's own data: the same numbers as the normal eval
for r in word byte bpe; do
    expect_rc 0 "$r own eval" "$BIN" eval $r --split test --json $r.own.json --quiet
    expect_rc 0 "$r --data own dir" "$BIN" eval $r --data wt --split test --json $r.data.json --quiet
done
$PY - <<'EOF' && ok || bad "--data on the run's own split differs from the normal eval"
import json, sys
err = []
for r in ("word", "byte", "bpe"):
    a, b = json.load(open(r + ".own.json")), json.load(open(r + ".data.json"))
    for x, y in zip(a["results"], b["results"]):
        if (x["nll"], x["tokens"], x["ppl"]) != (y["nll"], y["tokens"], y["ppl"]):
            err.append("%s L=%d: own %r / %d, --data %r / %d" % (r, x["length"], x["nll"], x["tokens"], y["nll"], y["tokens"]))
    if a["split_tokens"] != b["split_tokens"]: err.append("%s split tokens" % r)
    d = b["data"]["eval_data"]
    if d["kind"] != "wikitext" or not d["path"].endswith("wt/test.txt") or b["split"] != "test": err.append("%s record %r" % (r, d))
    if "eval_data" in a["data"]: err.append("own eval has an eval_data record")
for e in err: print(e)
sys.exit(1 if err else 0)
EOF

# the header counts what the split holds: bytes for a byte run, tokens for BPE (its
# metric is per byte, its count is not)
expect_rc 0 "byte eval header" "$BIN" eval byte --split test --lengths 16 --json hb.json
expect_out "^test split: [0-9]* bytes ([0-9]* targets), "
expect_rc 0 "bpe eval header" "$BIN" eval bpe --split test --lengths 16 --json hp.json
expect_out "^test split: [0-9]* tokens ([0-9]* targets, [0-9.]* bytes per token), "

# --- a different file, evaluated whole; default report name next to the run's own
expect_rc 0 "word own report" "$BIN" eval word --quiet
cp word/eval_valid_nonoverlapping.json word.valid.before
expect_rc 0 "byte --data other file" "$BIN" eval byte --data other.txt --lengths 16,64
expect_out "^--data other.txt"
[ -f byte/eval_data-other.txt_nonoverlapping.json ] && ok || bad "default report byte/eval_data-other.txt_nonoverlapping.json missing"
size=$(stat -c %s other.txt)
crc=$($PY -c 'import zlib; print("%08x" % zlib.crc32(open("other.txt","rb").read()))')
$PY - "$size" "$crc" <<'EOF' && ok || bad "byte --data JSON record"
import json, sys
r = json.load(open("byte/eval_data-other.txt_nonoverlapping.json"))
d = r["data"]["eval_data"]
size, crc = int(sys.argv[1]), sys.argv[2]
ok = (d["path"] == "other.txt" and d["kind"] == "file" and d["bytes"] == size and d["crc32"] == crc
      and d["tokens"] == size and r["split"] == "file" and r["split_tokens"] == size
      and all(x["status"] == "ok" and x["tokens"] == size - 1 for x in r["results"]) and "unk_tokens" not in d)
if not ok: print(json.dumps(r["data"]), r["split"], r["split_tokens"])
sys.exit(0 if ok else 1)
EOF

# --- word level: unseen words -> <unk>, counted
expect_rc 0 "word --data crafted" "$BIN" eval word --data crafted.txt --lengths 4 --json crafted.json
expect_out "4 unknown words -> <unk>, 3 distinct"
$PY - <<'EOF' && ok || bad "word --data <unk> counts"
import json, sys
r = json.load(open("crafted.json"))
d = r["data"]["eval_data"]
# 10 words + 3 <eos>; zz, yy, zz, xx-x unseen; one literal <unk>
ok = d["unk_tokens"] == 4 and d["unk_distinct"] == 3 and d["unk_literal"] == 1 and d["tokens"] == 13 and r["split_tokens"] == 13
if not ok: print(d)
sys.exit(0 if ok else 1)
EOF
cmp -s word/eval_valid_nonoverlapping.json word.valid.before && ok || bad "--data overwrote the run's own report"

# --- errors name the flag and the file
expect_rc 3 "missing file" "$BIN" eval byte --data nope.txt
expect_err "\-\-data nope.txt"
: > empty.txt
expect_rc 4 "empty file" "$BIN" eval byte --data empty.txt
expect_err "empty.txt: empty file"
printf 'abc\0def\n' > bin.dat
expect_rc 4 "binary file" "$BIN" eval byte --data bin.dat
expect_err "bin.dat.*binary"
expect_rc 4 "unseen words, no <unk>" "$BIN" eval nounk --data crafted.txt
expect_err "\-\-data crafted.txt: line 1: word \"zz\".*no <unk>"
expect_rc 2 "--split with a file" "$BIN" eval byte --data other.txt --split test
expect_err "\-\-split"
expect_rc 2 "synthetic run" "$BIN" eval syn --data other.txt
expect_err "synthetic"
mkdir loose && cp "word/checkpoints/$(cat word/checkpoints/latest)" loose/
expect_rc 3 "loose word checkpoint" "$BIN" eval "loose/$(cat word/checkpoints/latest)" --data other.txt
expect_err "tokenizer"
cp -r word word_swapped && cp nounk/tokenizer.json word_swapped/tokenizer.json
expect_rc 4 "another run's tokenizer" "$BIN" eval word_swapped --data other.txt
expect_err "\-\-data other.txt: tokenizer .*not the one"
expect_rc 2 "--data without a value" "$BIN" eval byte --data

echo "cli_eval_data: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
