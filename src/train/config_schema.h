/* config_schema.h - the run-config key table shared by config.c (parse, set, save, diff,
 * validate) and config_schema.c (the table itself). Internal to src/train. */
#ifndef ST_TRAIN_CONFIG_SCHEMA_H
#define ST_TRAIN_CONFIG_SCHEMA_H

#include "st_train.h"

/* Key kinds: how a JSON value maps onto a field of st_run_config. */
enum {
    CK_OBJ,         /* a nested object (section or sub-object) */
    CK_INT,         /* int */
    CK_I64,         /* int64_t */
    CK_U64,         /* uint64_t (seeds; JSON numbers are exact below 2^53) */
    CK_FLOAT,       /* float */
    CK_DOUBLE,      /* double */
    CK_BOOL,        /* int 0/1 from true/false */
    CK_ENUM,        /* int from a name */
    CK_STR,         /* char[size]; optionally restricted to the enum's names */
    CK_PATH,        /* char[size]; resolved to an absolute path by validation */
    CK_I64_LIST,    /* int64_t[size] with its count (int) at off_n */
    CK_MASK,        /* int bit mask from an array of names */
    CK_I64_3        /* int64_t[3], exactly three entries */
};

typedef struct st_cname { const char *name; int value; } st_cname;

/* Either a table of names, or functions owned by another module (model positions). */
typedef struct st_cenum {
    const st_cname *names;
    int n;
    int (*from)(const char *name);   /* -1 when unknown */
    const char *(*to)(int value);
    int count;                       /* values 0..count-1 for the function form */
} st_cenum;

typedef struct st_ckey {
    const char *path;       /* "model.rf.kind" */
    int kind;               /* CK_* */
    size_t off;             /* offsetof(st_run_config, field) */
    size_t size;            /* strings: buffer bytes; lists: capacity */
    size_t off_n;           /* CK_I64_LIST: offset of the int count */
    double min, max;        /* inclusive range of numbers (list elements too) */
    int xmin;               /* 1: min is exclusive */
    const st_cenum *en;     /* CK_ENUM, CK_MASK, restricted CK_STR */
    const char *def;        /* default, as a --set value ("4", "alibi", "[\"bias\"]");
                             * NULL: zero / empty, or derived at load time */
} st_ckey;

extern const st_ckey st_config_keys[];
extern const int st_config_nkeys;

const st_ckey *st_config_find_key(const char *path);
int st_cenum_from(const st_cenum *en, const char *name);      /* -1 if unknown */
const char *st_cenum_to(const st_cenum *en, int value);       /* NULL if none */
/* "\"a\", \"b\" or \"c\"" */
void st_cenum_list(const st_cenum *en, char *buf, size_t n);

/* Messages shared by parsing (config.c) and validation (config_validate.c): where a
 * value came from ("FILE: model.d_model", or "--set model.d_model" when file is NULL),
 * whether a number is in a key's range, and the error naming the whole range. */
void st_ckey_where(char *buf, size_t n, const char *file, const char *path);
int st_ckey_in_range(const st_ckey *k, double x);
int st_ckey_range_error(st_error *e, const char *loc, const st_ckey *k, double x);

#endif
