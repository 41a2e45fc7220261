/* st_common.h - status codes, error reports, logging, RNG and small helpers shared by
 * every module of stretch.
 *
 * Error policy: library functions never exit. A function that can fail on user input
 * takes an `st_error *` and returns an st_status; the message names the file and, for
 * configs, the JSON key path. Only src/cli/ turns a status into a process exit code.
 * Programmer errors (broken invariants) use ST_ASSERT, which is always on. */
#ifndef ST_COMMON_H
#define ST_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_VERSION "0.1.0"

/* Process exit codes (documented in README "Exit codes"). */
typedef enum st_status {
    ST_OK = 0,
    ST_ERR_GENERIC = 1,   /* anything not listed below */
    ST_ERR_CONFIG = 2,    /* bad config / CLI usage: unknown key, wrong type, out of range */
    ST_ERR_IO = 3,        /* file missing, unreadable, unwritable, output dir occupied */
    ST_ERR_DATA = 4,      /* bad data: empty file, bad bytes, token id out of range, vocab mismatch */
    ST_ERR_CHECKPOINT = 5,/* truncated / corrupt / foreign checkpoint or safetensors, config mismatch */
    ST_ERR_MEMORY = 6,    /* a size that would exceed memory, arena overflow, malloc failure */
    ST_ERR_NUMERIC = 7,   /* non-finite loss or gradient */
    ST_ERR_INTERRUPTED = 130 /* SIGINT/SIGTERM: state was saved, exit cleanly */
} st_status;

/* Paths. A path given by the user (CLI argument, config value, sweep "out") may be up to
 * ST_PATH_MAX bytes; stretch appends at most ST_PATH_SUFFIX bytes to it (run name,
 * checkpoints/step_NNNNNNNN.ckpt.tmp.PID.NONCE, ...), so every derived path fits in a
 * ST_PATH_BUF buffer and is never cut. Longer input is refused by st_path_check. */
#define ST_PATH_MAX 3072
#define ST_PATH_SUFFIX 1024
/* A directory stretch writes into (a run directory, a sweep's OUT/<point>, an export's
 * --out) must leave room below ST_PATH_MAX for the names it adds, or a file written hours
 * into a run is refused then (st_dir_check refuses the directory up front instead). The
 * longest is a step checkpoint's temp file: "/checkpoints/step_" (18) + the step, up to 13
 * digits (train.steps <= 1e12) + ".ckpt" (5) + the atomic writer's ".tmp." (5) + a PID of
 * up to 10 digits + "." and a 6-digit hex nonce (7) = 58; the others are shorter
 * ("/eval_valid_nonoverlapping.json" and its temp suffix: 53). Rounded up to 64. */
#define ST_DIR_ROOM 64
#define ST_PATH_BUF (ST_PATH_MAX + ST_PATH_SUFFIX + 1)

typedef struct st_error {
    int code;          /* st_status; ST_OK when no error */
    char msg[ST_PATH_BUF + 1024]; /* "file: key.path: what is wrong" (room for a whole path) */
} st_error;

/* Record an error (printf-style) and return its code. Safe with e == NULL. */
int st_fail(st_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void st_error_clear(st_error *e);
const char *st_status_name(int code);

/* Logging to stderr. Library code logs through this, never printf. */
enum { ST_LOG_DEBUG = 0, ST_LOG_INFO = 1, ST_LOG_WARN = 2, ST_LOG_ERROR = 3 };
void st_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* prefix + formatted text + '\n' to stderr in one write(2): under mpirun every rank's
 * stderr reaches one terminal, and a line written in pieces interleaves with another
 * rank's. */
void st_vlog_line(const char *prefix, const char *fmt, va_list ap);

/* Invariant check, always compiled in. Prints file:line and the expression, then aborts. */
#define ST_ASSERT(x) \
    do { if (!(x)) st_assert_fail(#x, __FILE__, __LINE__); } while (0)
void st_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

/* Out of memory where no error can be returned (a matmul backend's operand scratch, whose
 * gemm calls are void): prints "stretch: error: out of memory: BYTES bytes for WHAT" and
 * exits with ST_ERR_MEMORY (6, the documented code) instead of an assertion's abort. */
void st_oom_exit(const char *what, size_t bytes) __attribute__((noreturn));

/* Allocation that reports failure through st_error (ST_ERR_MEMORY with the size). */
void *st_malloc(size_t bytes, st_error *e);
void *st_calloc(size_t n, size_t size, st_error *e);
/* 64-byte aligned allocation (free with st_aligned_free). */
void *st_aligned_alloc(size_t bytes, st_error *e);
void st_aligned_free(void *p);

/* ---- RNG: xoshiro256** with an explicit state (no global rand()). ---- */
typedef struct st_rng { uint64_t s[4]; } st_rng;
void st_rng_seed(st_rng *r, uint64_t seed);
uint64_t st_rng_u64(st_rng *r);
double st_rng_uniform(st_rng *r);            /* [0, 1) */
float st_rng_normal(st_rng *r);              /* N(0, 1), Box-Muller */
uint64_t st_rng_below(st_rng *r, uint64_t n);/* uniform in [0, n), unbiased */

/* Counter-based hash: a pure function of (seed, index), so values do not depend on
 * which thread asks or in what order (used by dropout and data shuffles). */
static inline uint64_t st_hash64(uint64_t seed, uint64_t index) {
    /* inline so per-element mask loops (dropout) vectorise */
    uint64_t x = seed ^ (index * 0xD1B54A32D192ED03ull);
    x ^= x >> 32; x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32; x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
}
/* FNV-1a 64 of n bytes, continuing from h (ST_FNV_OFFSET to start): stable across platforms,
 * so it may be stored (a checkpoint's config hash, vocabulary hashes, cache file names). */
#define ST_FNV_OFFSET 0xcbf29ce484222325ull
#define ST_FNV_PRIME 0x100000001b3ull
static inline uint64_t st_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= ST_FNV_PRIME; }
    return h;
}
static inline float st_hash_uniform(uint64_t seed, uint64_t index) {
    return (float)(st_hash64(seed, index) >> 40) * (1.0f / 16777216.0f); /* [0,1), 24 bits */
}

/* Wall clock in seconds (monotonic). */
double st_time(void);
/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
size_t st_peak_rss(void);
/* Physical memory of the machine in bytes (0 if unknown). */
size_t st_mem_total(void);

/* ---- files (src/core/fileio.c) ---- */
/* ST_OK, or ST_ERR_CONFIG naming `what` when path is empty or longer than ST_PATH_MAX. */
int st_path_check(const char *path, const char *what, st_error *e);
/* The same for a directory stretch writes files into: ST_ERR_CONFIG naming `what` when dir
 * is empty or longer than ST_PATH_MAX - ST_DIR_ROOM. */
int st_dir_check(const char *dir, const char *what, st_error *e);
/* mkdir -p (ST_ERR_IO naming the component that failed). */
int st_mkdirs(const char *path, st_error *e);
/* path as one word of a shell command in a message ("continue with: stretch train
 * --resume DIR"): as it is when every byte is safe unquoted, else in single quotes (a
 * ' as '\''), so the command pasted into bash names the same path; into buf, returned. A
 * path too long for buf is cut (ST_PATH_BUF * 2 holds any accepted path). */
const char *st_shell_word(const char *path, char *buf, size_t n);
/* open(path, flags) of a regular file, its stat in *st: the fd, or -1 with e set
 * (ST_ERR_IO: cannot open, "is a directory", "not a regular file"). O_NONBLOCK is added,
 * so a FIFO in place of the file never blocks open() waiting for its other end; it is
 * refused like any other non-regular file. O_CREAT creates with mode 0644. */
struct stat;
int st_open_regular(const char *path, int flags, struct stat *st, st_error *e);
/* The `size` bytes of fd (from st_open_regular), NUL-terminated, malloc'd; fd is closed.
 * NULL with e set on a read error or a file that shrank. */
char *st_read_fd(int fd, const char *path, int64_t size, st_error *e);
/* A whole regular file (src/core/fileio.c), NUL-terminated (*len excludes the NUL),
 * malloc'd; NULL with e set (ST_ERR_IO) when it cannot be opened, is a directory, a FIFO
 * or any other non-regular file (never blocks), or is larger than max_bytes. */
char *st_read_file(const char *path, size_t *len, size_t max_bytes, st_error *e);

/* An exclusive lock on directory `dir` (flock on the directory itself, so it adds no file
 * to it) for as long as *fd stays open: one writer per run directory or sweep output.
 * Another process holding it: ST_ERR_IO "DIR: in use by another stretch process (what)".
 * The lock goes with the open file description, so forked children share it. */
int st_dir_lock(const char *dir, const char *what, int *fd, st_error *e);

/* The one atomic file writer: st_atomic_open creates PATH.tmp.PID.NONCE beside path and
 * returns its FILE (NULL with e set); write to a->f (seeking is fine); st_atomic_commit
 * flushes, fsyncs, closes, renames over path and fsyncs the directory; on any failure,
 * or with st_atomic_abort, the temp file is removed and path is untouched. */
typedef struct st_atomic_file { FILE *f; char *tmp, *path; } st_atomic_file;
/* Refuses (ST_ERR_IO) a path that exists and is not a regular file: the rename would
 * replace a symbolic link itself (its target left as it was), a device or a FIFO, not
 * write into it. st_atomic_open and st_link_atomic call it; commands call it before their
 * work so that a refusal costs nothing. `what` prefixes the message ("--json PATH"). */
int st_replaceable_check(const char *path, const char *what, st_error *e);
FILE *st_atomic_open(st_atomic_file *a, const char *path, st_error *e);
int st_atomic_commit(st_atomic_file *a, st_error *e);
void st_atomic_abort(st_atomic_file *a);
/* st_atomic_commit in two halves, for a set of files that must appear together (export):
 * finish flushes, fsyncs and closes, the content staying under the temp name (a failure
 * removes it); publish renames it over path. Finish every file before publishing any;
 * st_atomic_abort still removes a finished temp file. */
int st_atomic_finish(st_atomic_file *a, st_error *e);
int st_atomic_publish(st_atomic_file *a, st_error *e);
/* Make path a hard link of `existing`, atomically replacing what path was (ST_ERR_IO if
 * the file system cannot link). */
int st_link_atomic(const char *existing, const char *path, st_error *e);
/* Whole buffer -> path through st_atomic_open/commit. */
int st_write_file_atomic(const char *path, const void *data, size_t n, st_error *e);

/* ---- the live progress line (src/core/live.c) ----
 * On a terminal (stderr a TTY) and not quiet: one line rewritten in place ("\r" + erase)
 * at most 10 times a second (force: draw now). Off otherwise: show does nothing and
 * returns 0, and the caller writes plain log lines instead. Clear it before printing
 * anything else to stderr. */
typedef struct st_live { int on, shown; double t_last; } st_live;
void st_live_init(st_live *l, int quiet);
int st_live_show(st_live *l, int force, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void st_live_clear(st_live *l);
/* "1m23s", "41.2k", "[####......]" (buf of width + 1) for progress lines. */
void st_fmt_duration(char *buf, size_t n, double seconds);
void st_fmt_rate(char *buf, size_t n, double per_second);
void st_fmt_bar(char *buf, size_t width, int64_t done, int64_t total);

/* JSON as RFC 8259 has it where cJSON is lenient (src/core/json_strict.c): the offset of
 * the first number with a leading zero or a bare '.', raw control character in a string or
 * \u0000 escape, with *why saying which; (size_t)-1 when there is none. */
size_t st_json_strict_check(const char *text, size_t len, const char **why);

/* A JSON number that reads back as the same double (src/core/json_num.c): integers up to
 * 2^53 in full, else the shortest %g text; "null" for inf / nan. cJSON's own printing
 * rounds to 15 digits (a 16-digit seed changed). st_json_add_number adds one to a cJSON
 * object. */
void st_json_number_text(double d, char *buf, size_t n);
struct cJSON;
struct cJSON *st_json_add_number(struct cJSON *obj, const char *key, double d);
/* cJSON_Print (formatted) or cJSON_PrintUnformatted with every number as
 * st_json_number_text writes it (caller frees with cJSON_free); NULL when out of memory. */
char *st_json_print_exact(const struct cJSON *v, int formatted);
/* What an error message says a JSON value was: the number, the (cut) string, true, false,
 * null, or an array's or object's compact text (cut, with an array's entry count). */
void st_json_describe(const struct cJSON *v, char *buf, size_t n);

/* CRC32 (zlib) over a buffer, continuing from crc (start with 0). */
uint32_t st_crc32(uint32_t crc, const void *buf, size_t n);

/* ---- BLAS / threading environment (src/core/blas.c) ---- */
typedef struct st_blas_info {
    char corename[64];   /* e.g. "Haswell", "Cooperlake" (OpenBLAS's choice) */
    char config[256];    /* openblas_get_config() */
    int blas_threads;
    int omp_threads;
    int cpu_avx512;      /* CPU supports AVX-512F */
    int weak_core;       /* the BLAS core is weaker than the CPU supports */
} st_blas_info;
void st_blas_query(st_blas_info *info);
/* The OpenBLAS core to force when OpenBLAS picked a weaker one than the CPU supports
 * ("SkylakeX" for AVX-512, "Haswell" for AVX2 + FMA), else NULL. OpenBLAS reads
 * OPENBLAS_CORETYPE when it loads, so the caller sets it and re-executes (cli/main.c). */
const char *st_blas_better_core(void);
/* The vector extensions OpenBLAS core `core` needs and this CPU lacks ("AVX-512 (F, BW,
 * VL, DQ)" for SkylakeX and its kin, "AVX2 and FMA" for Haswell and Zen), or NULL when
 * the CPU runs it (every other name: older cores, and names of other architectures).
 * OpenBLAS 0.3.21 does not check a forced core: its first product stops with SIGILL. */
const char *st_blas_core_unsupported(const char *core);
/* 1 when OPENBLAS_CORETYPE=core (any case) names a core OpenBLAS knows (on x86; every
 * name elsewhere), else 0: OpenBLAS would silently run its probe's choice instead.
 * st_blas_core_names: those names, comma-separated, for a message. */
int st_blas_core_known(const char *core);
void st_blas_core_names(char *buf, size_t n);
/* The core with the widest vectors this CPU runs ("SkylakeX", "Haswell"), or NULL: leave
 * the choice to OpenBLAS's probe. */
const char *st_blas_best_core(void);
/* Log the BLAS core and thread counts; warn (saying what to change) when the core is
 * weaker than the CPU supports. */
void st_blas_log(void);
/* Set the thread count used by both OpenMP and OpenBLAS (n <= 0: number of cores).
 * Returns the count in use (a cap of OpenBLAS or OMP_THREAD_LIMIT can lower it). */
int st_set_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
