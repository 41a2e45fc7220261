#!/usr/bin/env bash
# cli_recovery.sh - failure and recovery of export and sweep (the recovery probe's findings):
#   export   a file that cannot be written (here a file size limit, `ulimit -f`, which fails
#            the tokenizer copy with EFBIG as a full disk fails it with ENOSPC) leaves an
#            earlier export exactly as it was and an empty --out empty, no temp files, and
#            the error says why; a directory in the way is refused before anything is
#            written; a --force export of a run without a tokenizer leaves no foreign one
# (a real full disk, tmpfs: cli_diskfull.sh)
. "$(dirname "$0")/lib_cli.sh" cli_recovery

no_temps() { # DIR WHAT: no *.tmp.* file left in DIR
    if ls -a "$1" | grep -q '\.tmp\.'; then bad "$2: temp files left in $1: $(ls -a "$1" | tr '\n' ' ')"; else ok; fi
}

# ---- export: the files appear together or not at all ----
# a word-level run whose tokenizer.json (45 KB) is larger than its model (25 KB) and config
big_vocab_cfg words.json
tiny_text_run alibi
expect_rc 0 "train the word run" "$BIN" train words.json --out runw --quiet
expect_rc 0 "train the byte run" "$BIN" train cfg.json --out runb --quiet
tok=$(wc -c < runw/tokenizer.json)
[ "$tok" -gt 40000 ] && ok || bad "the word run's tokenizer.json is $tok bytes, expected > 40000"

expect_rc 0 "export the byte run" "$BIN" export runb --out exp
sha256sum exp/* > exp.sha
# 32 KiB: the model and config fit, the tokenizer copy does not (SIGXFSZ is ignored: EFBIG)
(ulimit -f 32; "$BIN" export runw --out exp --force >out.txt 2>err.txt); rc=$?
[ "$rc" = 3 ] && ok || bad "export --force past the file size limit: exit $rc, expected 3"
expect_err "exp/tokenizer.json: copy from runw/tokenizer.json failed: File too large"
sha256sum -c --quiet exp.sha >/dev/null 2>&1 && ok || { bad "a failed export --force changed the earlier export"; sha256sum -c exp.sha; }
no_temps exp "failed export --force"
(ulimit -f 32; "$BIN" export runw --out fresh >out.txt 2>err.txt); rc=$?
[ "$rc" = 3 ] && ok || bad "export into an empty dir past the limit: exit $rc, expected 3"
[ -z "$(ls -A fresh 2>/dev/null)" ] && ok || bad "a failed export left files: $(ls -A fresh | tr '\n' ' ')"
expect_rc 0 "export --force within the limit" "$BIN" export runw --out exp --force
cmp -s exp/tokenizer.json runw/tokenizer.json && ! sha256sum -c --quiet exp.sha >/dev/null 2>&1 && ok \
    || bad "export --force did not replace every file"
no_temps exp "export --force"

# a directory where a file of the export goes: refused before anything is written
mkdir -p blocked/tokenizer.json
expect_rc 3 "export --force, a directory in the way" "$BIN" export runb --out blocked --force
expect_err "blocked/tokenizer.json: is a directory"
[ ! -e blocked/model.safetensors ] && [ ! -e blocked/config.json ] && ok || bad "export wrote files before refusing"
no_temps blocked "refused export"

# a run without a tokenizer exported over one with: no foreign tokenizer.json stays
cp -r runb runb_notok && rm runb_notok/tokenizer.json
expect_rc 0 "export the word run" "$BIN" export runw --out exp2
expect_rc 0 "export --force a run without tokenizer.json" "$BIN" export runb_notok --out exp2 --force
[ ! -e exp2/tokenizer.json ] && ok || bad "the earlier export's tokenizer.json stayed beside another model"

finish cli_recovery
