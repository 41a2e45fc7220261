/* registry.c - the table of position methods (built from ST_POS_METHODS in
 * include/st_model.h) and the public functions that reach a method through it: names,
 * variants, length limits, bias providers, the KV cache's sliding rule, learned rho. */
#include "pos.h"
#include "st_transform.h"

#include <stdio.h>
#include <string.h>

static const st_pos_method *const methods[ST_POS_COUNT] = {
#define ST_POS_ENTRY_(ID, name) [ST_POS_##ID] = &st_pos_##name,
    ST_POS_METHODS(ST_POS_ENTRY_)
#undef ST_POS_ENTRY_
};

const st_pos_method *st_pos_method_of(int pos) {
    ST_ASSERT(pos >= 0 && pos < ST_POS_COUNT);
    return methods[pos];
}

const char *st_pos_name(int pos) { return pos >= 0 && pos < ST_POS_COUNT ? methods[pos]->name : "?"; }

int st_pos_from_name(const char *name) {
    for (int i = 0; i < ST_POS_COUNT; i++) if (strcmp(name, methods[i]->name) == 0) return i;
    return -1;
}

const char *st_pos_variant_key(int pos) { return pos >= 0 && pos < ST_POS_COUNT ? methods[pos]->variant_key : NULL; }

const char *st_pos_variant(const st_model_config *c, const char **key, char *buf, size_t n) {
    const st_pos_method *pm = st_pos_method_of(c->pos);
    const char *v = pm->variant ? pm->variant(c, buf, n) : NULL;
    *key = v ? pm->variant_key : NULL;
    return v;
}

void st_pos_label(const st_model_config *c, char *buf, size_t n) {
    char vb[32];
    const char *key, *v = st_pos_variant(c, &key, vb, sizeof vb);
    int o = snprintf(buf, n, "%s%s%s%s%s", st_pos_name(c->pos), v ? "-" : "", v ? v : "",
                     c->attn_scale ? "+" : "", c->attn_scale ? st_attn_scale_name(c->attn_scale) : "");
    if (c->scaling != 0 && o >= 0 && (size_t)o < n)   /* trained scaling: "rope+yarn4" */
        o += snprintf(buf + o, n - (size_t)o, "+%s%g", st_transform_name(c->scaling), c->scaling_scale);
    if (c->abacus_rows > 0 && o >= 0 && (size_t)o < n)   /* Abacus embeddings: "fire+abacus" */
        snprintf(buf + o, n - (size_t)o, "+abacus");
}

int64_t st_pos_max_len(const st_model_config *c) {
    const st_pos_method *pm = st_pos_method_of(c->pos);
    return pm->max_len ? pm->max_len(c) : 0;
}

const char *st_pos_limit_why(int pos) {
    const char *w = st_pos_method_of(pos)->limit_why;
    return w ? w : "the method cannot represent longer sequences";
}

const char *st_pos_no_sinks(int pos) { return st_pos_method_of(pos)->no_sinks; }
const char *st_pos_no_doc_mask(int pos) { return st_pos_method_of(pos)->no_doc_mask; }
const char *st_pos_no_cache_positions(int pos) { return st_pos_method_of(pos)->no_cache_positions; }
const char *st_pos_unscaled_note(int pos) { return st_pos_method_of(pos)->unscaled_note; }

/* 1 when pm->keys names key or an object holding it ("model.fire" holds model.fire.c) */
static int lists_key(const st_pos_method *pm, const char *key) {
    for (const char *p = pm->keys; p && *p;) {
        const size_t n = strcspn(p, " ");
        if (n && strncmp(p, key, n) == 0 && (key[n] == 0 || key[n] == '.')) return 1;
        p += n;
        p += *p == ' ';
    }
    return 0;
}

int st_pos_key_reader(const char *key, int pos) {
    int listed = 0;
    for (int i = 0; i < ST_POS_COUNT; i++) listed |= lists_key(methods[i], key);
    return listed ? lists_key(st_pos_method_of(pos), key) : -1;
}

void st_pos_exercise(st_model_config *c) {
    const st_pos_method *pm = st_pos_method_of(c->pos);
    if (pm->exercise) pm->exercise(c);
}

int st_kv_cache_slides(int pos) { return st_pos_method_of(pos)->slides; }

int st_pos_abs_indices(int pos) { return pos >= 0 && pos < ST_POS_COUNT && methods[pos]->abs_indices; }

void st_pos_abs_list(char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < ST_POS_COUNT && o < n; i++)
        if (methods[i]->abs_indices) {
            int w = snprintf(buf + o, n - o, "%s%s", o ? ", " : "", methods[i]->name);
            if (w < 0) break;
            o += (size_t)w;
        }
}


int st_model_rf_rho(const st_model *m, int layer, float *rho) {
    const st_pos_method *pm = st_pos_method_of(m->cfg.pos);
    if (!pm->rho || layer < 0 || layer >= m->cfg.n_layers) return 0;
    return pm->rho(m, layer, rho);
}

void st_pos_bias_init(st_pos_bias *pb, const st_model_config *cfg, int bidirectional,
                      const float *params, float *grads) {
    memset(pb, 0, sizeof *pb);
    pb->kind = cfg->pos;
    pb->n_heads = cfg->n_heads;
    pb->bidirectional = bidirectional;
    pb->cfg = cfg;
    pb->params = pb->p[0] = params;
    pb->grads = pb->g[0] = grads;
    ST_ASSERT(cfg->n_heads <= ST_MAX_HEADS);
    const st_pos_method *pm = st_pos_method_of(cfg->pos);
    ST_ASSERT(pm->bias_init);
    pm->bias_init(pb);
}

/* A method's table is checked before any model uses it, so a kernel can never reach a
 * hook the provider lacks (issue 24: a NULL fill called through under --window).
 * bias_init runs dry (no parameters: providers only store pointers) and its provider must
 * match the declared form: DISTANCE sets fill (grad optional), GENERAL sets fill_block
 * and/or a content term (cope, gate), NONE sets nothing and needs no bias_init; a learnable
 * provider's backward hook comes with its forward one; a gate term comes with the hook
 * that computes it, and the other way round. */
int st_pos_method_check(int pos, const st_model_config *cfg, const char *file, st_error *e) {
    return st_pos_table_check(st_pos_method_of(pos), pos, cfg, file, e);
}

int st_pos_table_check(const st_pos_method *pm, int pos, const st_model_config *cfg, const char *file,
                       st_error *e) {
    const char *f = file ? file : "<config>";
    const char *why = NULL;
    if (!pm->name || !pm->name[0]) why = "no name";
    else if ((pm->bias_form == ST_POS_BIAS_NONE) != (pm->bias_init == NULL))
        why = pm->bias_init ? "a bias_init but bias form none" : "a bias form but no bias_init";
    if (!why && pm->bias_init) {
        st_pos_bias pb;
        memset(&pb, 0, sizeof pb);
        pb.kind = pos;
        pb.n_heads = cfg->n_heads <= ST_MAX_HEADS ? cfg->n_heads : ST_MAX_HEADS;
        pb.cfg = cfg;
        pm->bias_init(&pb);
        const st_attn_bias *b = &pb.iface;
        if (pm->bias_form == ST_POS_BIAS_DISTANCE && (!b->fill || b->fill_block || b->cope || b->gate))
            why = "a distance-form bias whose provider does not set fill alone";
        else if (pm->bias_form == ST_POS_BIAS_GENERAL && (b->fill || (!b->fill_block && !b->cope && !b->gate)))
            why = "a general-form bias whose provider sets neither fill_block nor a content term";
        else if ((b->gate != NULL) != (pm->gate != NULL))
            why = b->gate ? "a gate term but no gate hook" : "a gate hook but no gate term";
        else if ((b->grad && !b->fill) || (b->grad_block && !b->fill_block))
            why = "a bias gradient hook without its forward hook";
    }
    if (why)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.pos \"%s\": the method's table is inconsistent (%s)", f,
                       pm->name ? pm->name : "?", why);
    return ST_OK;
}
