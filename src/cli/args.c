/* args.c - the value parsers every subcommand uses for its flags, so that a flag value is
 * either exactly what the user meant or an exit-2 error naming the flag: whole-string
 * numbers in decimal notation only (no "12abc", no "0x10", no silent saturation, no "-1"
 * wrapping to 2^64-1, no "inf" or "nan"), comma lists without empty items, and paths that
 * are neither empty (`--out "$UNSET"` must not mean the filesystem root) nor longer than
 * stretch can extend. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_int_arg(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return 0;
    if (lo >= 0 && *s == '-') return 0;   /* strtoll would accept it; strtoull would wrap it */
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int cli_split_arg(const char *s, int *out) {
    if (!s) return 0;
    if (!strcmp(s, "valid")) *out = ST_SPLIT_VALID;
    else if (!strcmp(s, "test")) *out = ST_SPLIT_TEST;
    else return 0;
    return 1;
}

int cli_u64_arg(const char *s, uint64_t *out) {
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

int cli_num_arg(const char *s, double lo, double hi, double *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return 0;
    /* decimal notation only, as JSON writes numbers: strtod also reads hex ("0x10" is 16,
     * "0x1p4" too), which made --window 0x10 a window of 16 while --context 0x10 (base 10)
     * and --set eval.window=0x10 (JSON) are refused */
    if (s[strspn(s, "0123456789.eE+-")]) return 0;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int cli_key_arg(const char *cmd, const char *flag, const char *v, const char *key, const char *note, double *out) {
    double lo = 0, hi = 0, x = 0;
    int xlo = 0, integral = 0;
    ST_ASSERT(st_config_range(key, &lo, &hi, &xlo, &integral));
    int ok = cli_num_arg(v, lo, hi, &x) && !(xlo && x == lo) && (!integral || x == floor(x));
    if (ok) { *out = x; return ST_OK; }
    return cli_usage(cmd, "%s '%s': expected %s in %c%.17g, %.17g] (as %s%s%s)", flag, v, integral ? "an integer" : "a number",
                     xlo ? '(' : '[', lo, hi, key, note ? "; " : "", note ? note : "");
}

int64_t cli_key_max(const char *key) {
    double lo = 0, hi = 0;
    int xlo = 0, integral = 0;
    ST_ASSERT(st_config_range(key, &lo, &hi, &xlo, &integral));
    return (int64_t)hi;
}

int cli_distinct(const char *cmd, const char *flag, const double *v, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (v[i] == v[j]) return cli_usage(cmd, "%s: %g given twice", flag, v[i]);
    return ST_OK;
}

int cli_distinct_i64(const char *cmd, const char *flag, const int64_t *v, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (v[i] == v[j]) return cli_usage(cmd, "%s: %lld given twice", flag, (long long)v[i]);
    return ST_OK;
}

int cli_list_arg(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap) {
    int n = 0;
    const char *p = s;
    if (!s || !*s) return 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item || n == cap) return 0;   /* "16,,32", ",16", "16," */
        memcpy(item, p, len);
        item[len] = 0;
        if (!cli_int_arg(item, lo, hi, &out[n])) return 0;
        n++;
        if (!comma) return n;
        p = comma + 1;
    }
}

int cli_path_arg(const char *cmd, const char *flag, const char *v) {
    st_error e = {0};
    if (st_path_check(v, flag, &e)) return cli_usage(cmd, "%s", e.msg);
    return ST_OK;
}

int cli_dir_arg(const char *cmd, const char *flag, const char *dir) {
    st_error e = {0};
    if (st_dir_check(dir, flag, &e)) return cli_usage(cmd, "%s", e.msg);
    return ST_OK;
}

/* The deepest part of path that exists (path itself, or a parent), resolved: "" when
 * none can be (then nothing is refused on its account). */
static void existing_part(const char *path, char *real, size_t n) {
    char p[ST_PATH_BUF];
    struct stat st;
    snprintf(p, sizeof p, "%s", path);
    while (stat(p, &st) != 0) {
        char *slash = strrchr(p, '/');
        while (slash && slash > p && slash[1] == 0) { *slash = 0; slash = strrchr(p, '/'); }   /* "a/b/" */
        if (!slash) snprintf(p, sizeof p, ".");
        else if (slash == p) p[1] = 0;
        else *slash = 0;
    }
    char buf[PATH_MAX];
    snprintf(real, n, "%s", realpath(p, buf) ? buf : "");
}

int cli_outside_checkpoints(const char *cmd, const char *flag, const char *path) {
    char real[PATH_MAX], cfg[PATH_MAX + 16];
    existing_part(path, real, sizeof real);
    /* real and each of its parents: a directory "checkpoints" beside a config.json */
    for (char *end = real + strlen(real); end > real; end = strrchr(real, '/')) {
        *end = 0;
        const char *base = strrchr(real, '/');
        if (!base || strcmp(base + 1, "checkpoints") != 0) continue;
        snprintf(cfg, sizeof cfg, "%.*s/config.json", (int)(base - real), real);
        if (access(cfg, F_OK) != 0) continue;
        st_error e = {0};
        st_fail(&e, ST_ERR_IO, "%s %s: lies in %s, a run's checkpoint directory, which stretch train manages "
                "(--resume reads it, train.keep_last and --force delete files in it): choose a path outside it",
                flag, path, real);
        return cli_report(cmd, &e);
    }
    return ST_OK;
}

int cli_out_dir_arg(const char *cmd, const char *flag, const char *dir) {
    if (cli_dir_arg(cmd, flag, dir)) return ST_ERR_CONFIG;
    return cli_outside_checkpoints(cmd, flag, dir);
}

int cli_output_file(const char *cmd, const char *flag, const char *path, int force) {
    struct stat st;
    st_error e = {0};
    int rc = cli_outside_checkpoints(cmd, flag, path);
    if (rc) return rc;
    if (lstat(path, &st) != 0) {   /* a new file: its directory must exist or be made, and take it */
        char dir[ST_PATH_BUF];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) slash[1] = 0;
        else *slash = 0;
        if (stat(dir, &st) != 0) {
            st_error me = {0};
            if (errno != ENOENT) st_fail(&e, ST_ERR_IO, "%s %s: cannot create: %s: %s", flag, path, dir, strerror(errno));
            else if (st_mkdirs(dir, &me)) st_fail(&e, ST_ERR_IO, "%s %s: cannot create: %s", flag, path, me.msg);
            else st_log(ST_LOG_INFO, "%s %s: created the directory %s", flag, path, dir);
        } else if (!S_ISDIR(st.st_mode)) {
            st_fail(&e, ST_ERR_IO, "%s %s: cannot create: %s is not a directory", flag, path, dir);
        } else if (access(dir, W_OK | X_OK) != 0) {
            st_fail(&e, ST_ERR_IO, "%s %s: cannot create: %s: %s", flag, path, dir, strerror(errno));
        } else {
            /* root passes access() where the file system still refuses (/proc, a
             * read-only bind) */
            st_error pe = {0};
            if (cli_writable_probe(path, &pe)) st_fail(&e, pe.code, "%s %s", flag, pe.msg);
        }
        return e.code ? cli_report(cmd, &e) : ST_OK;
    }
    /* the writers rename a new file over the path (st_atomic_open), which replaces whatever
     * is there: --force put a regular file in place of /dev/null, and of the link
     * /dev/stdout (its target a file), leaving the link's target as it was */
    char what[ST_PATH_BUF + 64];
    snprintf(what, sizeof what, "%s %s", flag, path);
    if (!st_replaceable_check(path, what, &e) && !force)
        st_fail(&e, ST_ERR_IO, "%s %s: the file exists; stretch %s replaces it only with --force", flag, path, cmd);
    /* an existing file in a directory that takes no new file (a read-only mount) cannot be
     * replaced either: eval --json FILE --force evaluated, then failed */
    st_error pe = {0};
    if (!e.code && cli_writable_probe(path, &pe)) st_fail(&e, pe.code, "%s %s", flag, pe.msg);
    return e.code ? cli_report(cmd, &e) : ST_OK;
}

int cli_writable_probe(const char *path, st_error *e) {
    st_atomic_file af;
    if (!st_atomic_open(&af, path, e)) return e->code ? e->code : ST_ERR_IO;
    st_atomic_abort(&af);
    return ST_OK;
}

int cli_default_report_writable(const char *cmd, const char *path) {
    st_error e = {0}, pe = {0};
    if (!cli_writable_probe(path, &pe)) return ST_OK;
    st_fail(&e, pe.code, "%s (the default report): nothing was evaluated; name a report with --json OUT.json",
            pe.msg);
    return cli_report(cmd, &e);
}

/* 1 when s is one of the flags: the command's own that take a value, or a flag without
 * one that some command has. A value that is a flag means the value was left out
 * ("--source --cache-dir D" would take "--cache-dir" as the source). */
static int is_flag(const char *s, const char *const *valued) {
    static const char *const bare[] = {"--quiet", "--force", "--help", "--no-cache", "--dry-run", "--profile", "--zero",
                                       "--no-train", "--no-eval", "--attn-stats", "--resume", NULL};
    if (strncmp(s, "--", 2) != 0) return 0;
    for (const char *const *f = valued; *f; f++) if (!strcmp(s, *f)) return 1;
    for (const char *const *f = bare; *f; f++) if (!strcmp(s, *f)) return 1;
    return 0;
}

/* A flag's long name: the short aliases (train's and extend's -o) are the same flag. */
static const char *long_name(const char *flag) { return !strcmp(flag, "-o") ? "--out" : flag; }

int cli_flag_value(const char *cmd, const char *const *valued, int argc, char **argv, int *i, const char **v) {
    *v = NULL;
    for (const char *const *f = valued; *f; f++) {
        if (strcmp(argv[*i], *f)) continue;
        if (*i + 1 >= argc) return cli_usage(cmd, "%s needs a value", argv[*i]);
        if (is_flag(argv[*i + 1], valued))
            return cli_usage(cmd, "%s needs a value (the next argument is the flag %s)", argv[*i], argv[*i + 1]);
        /* a flag given twice would silently keep its last value (probe 27: --precision bf16
         * --precision fp32), under its alias too (--out a -o b); --set is the one meant to repeat */
        const char *name = long_name(*f);
        for (int j = *i + 2; j < argc && strcmp(*f, "--set") != 0; j++)
            if (!strcmp(long_name(argv[j]), name))
                return cli_usage(cmd, "%s given twice ('%s' and '%s'%s%s): give it once", name, argv[*i + 1],
                                 j + 1 < argc ? argv[j + 1] : "", strcmp(argv[*i], argv[j]) ? "; -o is " : "",
                                 strcmp(argv[*i], argv[j]) ? name : "");
        *v = argv[++*i];
        return ST_OK;
    }
    return ST_OK;
}

int cli_lengths_arg(const char *s, int64_t lo, int64_t hi, int64_t *out, int max) {
    const char *dots = strstr(s, "..");
    if (!dots) return cli_list_arg(s, lo, hi, out, max);
    char a[32];
    const size_t n = (size_t)(dots - s);
    if (n == 0 || n >= sizeof a) return 0;
    memcpy(a, s, n);
    a[n] = 0;
    int64_t first, last;
    if (!cli_int_arg(a, lo, hi, &first) || !cli_int_arg(dots + 2, first, hi, &last)) return 0;
    int k = 0;
    for (int64_t L = first;; L *= 2) {
        if (k == max) return 0;
        out[k++] = L;
        if (L > last / 2) break;   /* 2L > last; testing before doubling cannot overflow */
    }
    return k;
}
