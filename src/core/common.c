/* common.c - errors, logging, checked allocation, RNG, clocks, memory figures. */
#define _GNU_SOURCE
#include "st_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int st_fail(st_error *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void st_error_clear(st_error *e) {
    if (e) { e->code = ST_OK; e->msg[0] = 0; }
}

const char *st_status_name(int code) {
    switch (code) {
    case ST_OK: return "ok";
    case ST_ERR_CONFIG: return "config";
    case ST_ERR_IO: return "io";
    case ST_ERR_DATA: return "data";
    case ST_ERR_CHECKPOINT: return "checkpoint";
    case ST_ERR_MEMORY: return "memory";
    case ST_ERR_NUMERIC: return "numeric";
    case ST_ERR_INTERRUPTED: return "interrupted";
    default: return "error";
    }
}

void st_log(int level, const char *fmt, ...) {
    static const char *tag[] = {"debug", "info", "warning", "error"};
    if (level < ST_LOG_INFO) {
        const char *v = getenv("STRETCH_DEBUG");
        if (!v || !*v || *v == '0') return;
    }
    if (level < 0) level = 0;
    if (level > 3) level = 3;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[stretch] %s: ", tag[level]);
    va_list ap;
    va_start(ap, fmt);
    st_vlog_line(prefix, fmt, ap);
    va_end(ap);
}

void st_vlog_line(const char *prefix, const char *fmt, va_list ap) {
    char small[1024], *buf = small;
    size_t np = strlen(prefix);
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    if (n < 0) n = 0;
    size_t len = np + (size_t)n + 1;
    if (len + 1 > sizeof small && !(buf = malloc(len + 1))) {
        buf = small;                           /* out of memory: a truncated line */
        len = sizeof small - 1;
    }
    memcpy(buf, prefix, np < len ? np : len);
    if (np < len) vsnprintf(buf + np, len - np, fmt, ap);
    buf[len - 1] = '\n';
    buf[len] = 0;
    fwrite(buf, 1, len, stderr);               /* stderr is unbuffered: one write(2) */
    if (buf != small) free(buf);
}

void st_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "[stretch] internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}

/* "stretch: error: ...": the library does not know which command runs (the CLI's own
 * lines name it), and the prefix is the one a log reader looks for either way */
static void oom_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    st_vlog_line("stretch: error: ", fmt, ap);
    va_end(ap);
}

void st_oom_exit(const char *what, size_t bytes) {
    fflush(stdout);
    oom_line("out of memory: %zu bytes for %s", bytes, what);
    exit(ST_ERR_MEMORY);
}

void *st_malloc(size_t bytes, st_error *e) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) st_fail(e, ST_ERR_MEMORY, "out of memory: could not allocate %zu bytes", bytes);
    return p;
}

void *st_calloc(size_t n, size_t size, st_error *e) {
    if (size && n > SIZE_MAX / size) {
        st_fail(e, ST_ERR_MEMORY, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) st_fail(e, ST_ERR_MEMORY, "out of memory: could not allocate %zu bytes", n * size);
    return p;
}

void *st_aligned_alloc(size_t bytes, st_error *e) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        st_fail(e, ST_ERR_MEMORY, "out of memory: could not allocate %zu bytes", bytes);
        return NULL;
    }
    return p;
}

void st_aligned_free(void *p) { free(p); }

/* ---- xoshiro256** (Blackman & Vigna), seeded through splitmix64 ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void st_rng_seed(st_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t st_rng_u64(st_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double st_rng_uniform(st_rng *r) { return (double)(st_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

float st_rng_normal(st_rng *r) {
    /* Box-Muller; one draw per call keeps the stream position simple to reason about. */
    double u1 = st_rng_uniform(r), u2 = st_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t st_rng_below(st_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do { x = st_rng_u64(r); } while (x >= lim);
    return x % n;
}

double st_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t read_kb_field(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0) { kb = (size_t)strtoull(line + klen, NULL, 10); break; }
    }
    fclose(f);
    return kb * 1024;
}

size_t st_peak_rss(void) { return read_kb_field("/proc/self/status", "VmHWM:"); }
size_t st_mem_total(void) { return read_kb_field("/proc/meminfo", "MemTotal:"); }

uint32_t st_crc32(uint32_t crc, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {   /* zlib takes uInt lengths */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk; n -= chunk;
    }
    return crc;
}
