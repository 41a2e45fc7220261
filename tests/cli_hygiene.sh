#!/usr/bin/env bash
# cli_hygiene.sh - source-tree rules that a reader could break without any other test
# noticing (issue 14):
#   * one atomic file writer: no file outside src/core/fileio.c calls rename() or fsync()
#     or builds its own "PATH.tmp" name (item 5);
#   * no fixed small path buffers: path-sized buffers use ST_PATH_BUF (item 6).
. "$(dirname "$0")/lib_cli.sh" hygiene

hits=$(grep -rnE '\b(rename|fsync|fdatasync)\(' "$SRC/src" --include='*.c' | grep -v '^[^:]*src/core/fileio.c:' || true)
[ -z "$hits" ] && ok || bad "rename/fsync outside src/core/fileio.c (use st_atomic_open / st_write_file_atomic): $hits"
hits=$(grep -rnE '"%s\.tmp' "$SRC/src" --include='*.c' | grep -v '^[^:]*src/core/fileio.c:' || true)
[ -z "$hits" ] && ok || bad "hand-made temp file names outside src/core/fileio.c: $hits"
# char path[1024], dir[2048], tmp[1200], ... : a path buffer whose size is not ST_PATH_BUF
hits=$(grep -rnE 'char +[a-z_]*(path|dir|tmp|file|cand|best|latest|ckpt|cfgp|source|checkpoint|out|init_from)[a-z_]*(\[[0-9]+\])?\[[0-9]{4,}\]' \
       "$SRC/src" "$SRC/include" --include='*.[ch]' || true)
[ -z "$hits" ] && ok || bad "fixed-size path buffers (use ST_PATH_BUF): $hits"

echo "cli_hygiene: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
