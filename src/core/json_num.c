/* json_num.c - numbers written into JSON exactly. cJSON prints a double with 15
 * significant digits whenever that reads back within a relative 2^-52 (an approximate
 * comparison), so a seed of 2^53 - 1 came out as 9.00719925474099e+15 and read back as
 * another seed. Here: integers up to 2^53 in full, other values in the fewest digits
 * that read back as the same double. */
#include "st_common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_json_number_text(double d, char *buf, size_t n) {
    if (!isfinite(d)) { snprintf(buf, n, "null"); return; }   /* JSON has no inf / nan */
    if (d == floor(d) && fabs(d) <= 9007199254740992.0) { snprintf(buf, n, "%.0f", d); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return;
    }
}

struct cJSON *st_json_add_number(struct cJSON *obj, const char *key, double d) {
    char buf[40];
    st_json_number_text(d, buf, sizeof buf);
    return cJSON_AddRawToObject(obj, key, buf);
}

/* Every number node of the tree a raw node of its exact text (recursively). */
static int exact_numbers(cJSON *v) {
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v)) {
            char buf[40];
            st_json_number_text(v->valuedouble, buf, sizeof buf);
            char *t = cJSON_malloc(strlen(buf) + 1);
            if (!t) return -1;
            memcpy(t, buf, strlen(buf) + 1);
            v->type = cJSON_Raw;
            v->valuestring = t;
        } else if (v->child && exact_numbers(v->child)) {
            return -1;
        }
    }
    return 0;
}

char *st_json_print_exact(const struct cJSON *v, int formatted) {
    cJSON *copy = cJSON_Duplicate(v, 1);
    if (!copy) return NULL;
    char *text = exact_numbers(copy) ? NULL : formatted ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return text;
}

/* An array or object as its compact text, cut after 60 characters (with an array's count,
 * which the cut hides): "expected an array of 1 to 32 lengths, got an array" did not say
 * that the array was [] or had 33 entries. */
static void describe_container(const cJSON *v, char *buf, size_t n) {
    const int array = cJSON_IsArray(v);
    char *text = st_json_print_exact(v, 0);
    if (!text) snprintf(buf, n, "%s", array ? "an array" : "an object");
    else if (strlen(text) <= 60) snprintf(buf, n, "%s", text);
    else if (array) snprintf(buf, n, "%.60s... (%d entries)", text, cJSON_GetArraySize(v));
    else snprintf(buf, n, "%.60s...", text);
    cJSON_free(text);
}

void st_json_describe(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, n, "\"%.60s\"%s", v->valuestring, strlen(v->valuestring) > 60 ? "..." : "");
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) describe_container(v, buf, n);
    else snprintf(buf, n, "an invalid value");
}
