/* transform.c - the table of inference-time position transforms (include/st_transform.h
 * has the math): per kind, the position method it applies to and its hooks. The model
 * reaches a transform only through the functions below: RoPE asks for its frequencies
 * (st_transform_rope_freqs), a bias provider is adjusted once it is set up
 * (st_transform_bias), attention applies sinks + window and rerope's clipped positions
 * (model.c, decode.c: st_transform_clip). */
#include "st_transform.h"
#include "st_model.h"
#include "pos/pos.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct xf_entry {
    const char *name;
    const char *method;     /* model.pos it applies to (NULL: none) */
    int dynamic;            /* s from the current length instead of n */
    int clips;              /* relative positions clipped at w (attention uses q2, k2) */
    int ramp;               /* reads model.scaling.yarn_alpha / yarn_beta and needs train_len */
    const char *untrainable;   /* why it cannot be a trained scaling (NULL: it can) */
    /* RoPE: inv[i] = transformed theta_i (inv holds the plain theta_i on entry) */
    void (*freqs)(const st_transform *xf, double s, int64_t D, double base, double *inv, float *qk_scale);
    /* bias provider: adjust the method's per-head constants */
    void (*bias)(double s, struct st_pos_bias *pb);
} xf_entry;

/* PI: positions p -> p / s, i.e. theta_i / s */
static void pi_freqs(const st_transform *xf, double s, int64_t D, double base, double *inv, float *qk_scale) {
    (void)xf; (void)base; (void)qk_scale;
    for (int64_t i = 0; i < D / 2; i++) inv[i] /= s;
}

/* NTK-aware: base' = base s^(D/(D-2)), theta_i = base'^(-2i/D) */
static void ntk_freqs(const st_transform *xf, double s, int64_t D, double base, double *inv, float *qk_scale) {
    (void)xf; (void)qk_scale;
    if (s == 1.0) return;   /* base' = base exactly */
    const double b = base * pow(s, (double)D / (double)(D - 2));
    for (int64_t i = 0; i < D / 2; i++) inv[i] = pow(b, -2.0 * (double)i / (double)D);
}

/* YaRN (paper eqs. 18-20): r_i = L / lambda_i = L theta_i / (2 pi) rotations of
 * dimension i over the training length; g = ramp of r between alpha and beta; high
 * frequencies (r > beta) keep theta_i, low ones (r < alpha) are interpolated by s. The
 * attention temperature sqrt(1/t) = 0.1 ln s + 1 scales q and k (so q.k by 1/t). alpha and
 * beta are the transform's (model.scaling.yarn_alpha / yarn_beta), 1 and 32 by default. */
static void yarn_freqs(const st_transform *xf, double s, int64_t D, double base, double *inv, float *qk_scale) {
    (void)base;
    const double alpha = xf->yarn_alpha > 0 ? xf->yarn_alpha : (double)ST_YARN_ALPHA;
    const double beta = xf->yarn_beta > 0 ? xf->yarn_beta : (double)ST_YARN_BETA;
    for (int64_t i = 0; i < D / 2; i++) {
        const double r = (double)xf->train_len * inv[i] / (2.0 * M_PI);
        double g = (r - alpha) / (beta - alpha);
        g = g < 0 ? 0 : g > 1 ? 1 : g;
        inv[i] = (1.0 - g) * inv[i] / s + g * inv[i];
    }
    *qk_scale = (float)(0.1 * log(s) + 1.0);
}

/* ALiBi interpolation: m_h -> m_h L / n = m_h / s */
static void alibi_interp_bias(double s, struct st_pos_bias *pb) {
    for (int h = 0; h < pb->n_heads; h++) pb->slopes[h] = (float)((double)pb->slopes[h] / s);
}

static const xf_entry table[ST_XF_COUNT] = {
    [ST_XF_NONE] = {.name = "none"},
    [ST_XF_PI] = {.name = "pi", .method = "rope", .freqs = pi_freqs},
    [ST_XF_NTK] = {.name = "ntk", .method = "rope", .freqs = ntk_freqs},
    [ST_XF_DYNAMIC_NTK] = {.name = "dynamic_ntk", .method = "rope", .dynamic = 1, .freqs = ntk_freqs,
                           .untrainable = "its scale follows the current length, which never exceeds the training "
                                          "length in training, so it would train the unscaled model; train with ntk "
                                          "and a fixed model.scaling.scale"},
    [ST_XF_YARN] = {.name = "yarn", .method = "rope", .ramp = 1, .freqs = yarn_freqs},
    [ST_XF_REROPE] = {.name = "rerope", .method = "rope", .clips = 1,
                      .untrainable = "its two-pass attention (clipped far keys) exists in the inference kernels "
                                     "only, without a backward"},
    [ST_XF_ALIBI_INTERP] = {.name = "alibi_interp", .method = "alibi", .bias = alibi_interp_bias},
};

const char *st_transform_name(int kind) { return kind >= 0 && kind < ST_XF_COUNT ? table[kind].name : "?"; }

int st_transform_from_name(const char *name) {
    for (int k = 0; k < ST_XF_COUNT; k++) if (strcmp(name, table[k].name) == 0) return k;
    return -1;
}

void st_transform_list(char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int k = 0; k < ST_XF_COUNT && used < n; k++) {
        const int w = snprintf(buf + used, n - used, "%s%s", k ? ", " : "", table[k].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

const char *st_transform_untrainable(int kind) {
    return kind >= 0 && kind < ST_XF_COUNT ? table[kind].untrainable : "unknown transform";
}

const char *st_transform_method(int kind) { return kind >= 0 && kind < ST_XF_COUNT ? table[kind].method : NULL; }

int st_transform_dynamic(int kind) { return kind >= 0 && kind < ST_XF_COUNT && table[kind].dynamic; }

int st_transform_ramp(int kind) { return kind >= 0 && kind < ST_XF_COUNT && table[kind].ramp; }

int st_transform_active(const st_transform *xf) {
    return xf && (xf->kind != ST_XF_NONE || xf->window > 0 || xf->block > 0);
}

/* Where a field came from, for the messages: the command line's flag or the config's key.
 * xf->cli says it per field when a command merged the two (ST_XF_CLI_*); else `flag` does
 * for every field ("--...": a command line, else a config). */
static const char *origin(const st_transform *xf, const char *flag, unsigned bit, const char *opt, const char *key) {
    return (xf->cli ? (xf->cli & bit) != 0 : flag[0] == '-') ? opt : key;
}

/* Cache positions (StreamingLLM): they move the sinks, so they need sinks and a window, a
 * method whose positions the query can carry (st_pos_no_cache_positions), and a transform
 * that does not use the second query already (rerope's clipped scores) or change its
 * scale with the current length (dynamic_ntk: capped by the cache, not by the text). */
static int check_cache_positions(const st_transform *xf, int pos, const char *flag, st_error *e) {
    const char *opt = origin(xf, flag, ST_XF_CLI_POSITIONS, "--positions cache", "eval.positions \"cache\"");
    /* a field that is 0 in both the flags and the config a command merged: name both */
    const int both = xf->cli != 0;
    if (xf->sinks == 0 || xf->window == 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: moves the attention sinks into the cache; it needs sinks and a window "
                       "(%s, %s)", opt,
                       origin(xf, flag, ST_XF_CLI_SINKS, "--sinks K", both ? "--sinks K or eval.sinks" : "eval.sinks"),
                       origin(xf, flag, ST_XF_CLI_WINDOW, "--window W", both ? "--window W or eval.window" : "eval.window"));
    const char *why = st_pos_no_cache_positions(pos);
    if (why)
        return st_fail(e, ST_ERR_CONFIG, "%s: not supported for model.pos \"%s\": %s", opt, st_pos_name(pos), why);
    if (table[xf->kind].clips || table[xf->kind].dynamic)
        return st_fail(e, ST_ERR_CONFIG, "%s: not supported with transform %s (%s): %s", opt, table[xf->kind].name,
                       origin(xf, flag, ST_XF_CLI_KIND, "--transform", "eval.transform"),
                       table[xf->kind].clips ? "both move the far keys' scores to a second query"
                                             : "its scale would follow the cache's length, not the text's");
    return ST_OK;
}

int st_transform_check(const st_transform *xf, int pos, const char *flag, st_error *e) {
    /* each field's flag or key */
    const char *kind = origin(xf, flag, ST_XF_CLI_KIND, "--transform", "eval.transform");
    const char *scale = origin(xf, flag, ST_XF_CLI_SCALE, "--scale", "eval.transform_scale");
    const char *clip = origin(xf, flag, ST_XF_CLI_CLIP, "--clip", "eval.clip");
    const char *sinks = origin(xf, flag, ST_XF_CLI_SINKS, "--sinks", "eval.sinks");
    const char *window = origin(xf, flag, ST_XF_CLI_WINDOW, "--window", "eval.window");
    const char *block = origin(xf, flag, ST_XF_CLI_BLOCK, "--blockwise", "eval.blockwise");
    if (xf->kind < 0 || xf->kind >= ST_XF_COUNT)
        return st_fail(e, ST_ERR_CONFIG, "%s: unknown transform %d", kind, xf->kind);
    const char *need = table[xf->kind].method;
    if (need && st_pos_from_name(need) != pos)
        return st_fail(e, ST_ERR_CONFIG, "%s %s: applies to model.pos \"%s\" only; this run's model.pos is \"%s\"",
                       kind, table[xf->kind].name, need, st_pos_name(pos));
    if (xf->scale != 0.0 && !(xf->scale >= 1.0 && isfinite(xf->scale)))
        return st_fail(e, ST_ERR_CONFIG, "%s: scale %g: must be >= 1 (or 0 for n / L)", scale, xf->scale);
    if (xf->scale != 0.0 && xf->kind == ST_XF_NONE)
        return st_fail(e, ST_ERR_CONFIG, "%s: a scale needs a transform (pi, ntk, yarn, alibi_interp; %s)", scale, kind);
    if (xf->scale != 0.0 && table[xf->kind].clips)
        return st_fail(e, ST_ERR_CONFIG, "%s: %s rerope takes a clip window (%s), not a scale", scale, kind, clip);
    if (xf->clip < 0 || (xf->clip > 0 && !table[xf->kind].clips))
        return st_fail(e, ST_ERR_CONFIG, "%s: a clip window applies to rerope only (%s)", clip, kind);
    if (xf->scale != 0.0 && table[xf->kind].dynamic)
        return st_fail(e, ST_ERR_CONFIG, "%s: %s dynamic_ntk's scale is the current length / L; give no scale", scale,
                       kind);
    if (xf->sinks < 0 || xf->window < 0)
        return st_fail(e, ST_ERR_CONFIG, "%s, %s: sinks and window must be >= 0", sinks, window);
    if (xf->sinks > 0 && xf->window == 0) {
        /* a window nobody set is asked for where the sinks were set (--sinks on a command
         * line needs --window there, the config's eval.sinks its eval.window): it said
         * eval.window to a user who had typed --sinks */
        const int on_cli = xf->cli ? (xf->cli & (ST_XF_CLI_WINDOW | ST_XF_CLI_SINKS)) != 0 : flag[0] == '-';
        return st_fail(e, ST_ERR_CONFIG, "%s %lld: attention sinks need a window (%s W: the keys besides the sinks)",
                       sinks, (long long)xf->sinks, on_cli ? "--window" : "eval.window");
    }
    if (xf->block < 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: %lld: a block length is >= 1 (0: no blocks)", block, (long long)xf->block);
    if (xf->block > 0 && xf->window > 0)
        return st_fail(e, ST_ERR_CONFIG, "%s %lld and %s %lld: blockwise causal attention and an attention window are two "
                       "masks; give one (set the other to 0)", block, (long long)xf->block, window, (long long)xf->window);
    const char *why = st_pos_no_sinks(pos);
    if (xf->sinks > 0 && why)
        return st_fail(e, ST_ERR_CONFIG, "%s: attention sinks are not supported for model.pos \"%s\": %s", sinks,
                       st_pos_name(pos), why);
    if (xf->cache_positions) return check_cache_positions(xf, pos, flag, e);
    return ST_OK;
}

int64_t st_transform_clip(const st_transform *xf) {
    if (!xf || !table[xf->kind].clips) return 0;
    if (xf->clip > 0) return xf->clip;
    return xf->train_len / 2 > 1 ? xf->train_len / 2 : 1;
}

int64_t st_transform_cache_cap(const st_transform *xf) {
    if (!xf || !xf->cache_positions || xf->sinks <= 0 || xf->window <= 0) return 0;
    return xf->sinks + xf->window - 1;
}

double st_transform_scale(const st_transform *xf, int64_t len) {
    if (!xf || xf->kind == ST_XF_NONE) return 1.0;
    if (!table[xf->kind].dynamic && xf->scale > 0) return xf->scale;
    const int64_t n = table[xf->kind].dynamic ? (xf->cur_len > 0 ? xf->cur_len : len) : xf->n;
    const double s = xf->train_len > 0 ? (double)n / (double)xf->train_len : 1.0;
    return s > 1.0 ? s : 1.0;
}

void st_transform_label(const st_transform *xf, char *buf, size_t n) {
    int o = 0;
    buf[0] = 0;
    if (xf && xf->kind != ST_XF_NONE) {
        o = snprintf(buf, n, "%s", table[xf->kind].name);
        if (xf->scale > 0 && o >= 0 && (size_t)o < n) o += snprintf(buf + o, n - (size_t)o, " s=%g", xf->scale);
        if (xf->clip > 0 && o >= 0 && (size_t)o < n) o += snprintf(buf + o, n - (size_t)o, " w=%lld", (long long)xf->clip);
    }
    if (xf && xf->window > 0 && o >= 0 && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, "%ssinks=%lld window=%lld%s", o ? "+" : "", (long long)xf->sinks,
                      (long long)xf->window, xf->cache_positions ? " positions=cache" : "");
    if (xf && xf->block > 0 && o >= 0 && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, "%sblockwise=%lld", o ? "+" : "", (long long)xf->block);
    if (!buf[0]) snprintf(buf, n, "none");
}

void st_transform_rope_freqs(const st_transform *xf, int64_t D, double base, int64_t len,
                             double *inv_freq, float *qk_scale) {
    for (int64_t i = 0; i < D / 2; i++) inv_freq[i] = pow(base, -2.0 * (double)i / (double)D);
    *qk_scale = 1.0f;
    if (!xf || xf->kind == ST_XF_NONE || !table[xf->kind].freqs) return;
    const double s = st_transform_scale(xf, len);
    table[xf->kind].freqs(xf, s, D, base, inv_freq, qk_scale);
}

void st_transform_bias(const st_transform *xf, struct st_pos_bias *pb) {
    if (!xf || xf->kind == ST_XF_NONE || !table[xf->kind].bias) return;
    table[xf->kind].bias(st_transform_scale(xf, xf->n), pb);
}
