/* json_strict.c - what cJSON lets through and RFC 8259 does not, checked on the text
 * before cJSON parses it: numbers with a leading zero ("01", "-01") or a '.' without a
 * digit after it ("4.", "1.e3"), raw control characters inside a string, the escape
 * \u0000, which cJSON decodes into a C string that silently ends there ("rope\u0000x"
 * would read as "rope"). Nesting deeper than cJSON's limit is named here (cJSON says only
 * "invalid JSON"). Everything else (structure, other escapes, exponents) is cJSON's to
 * reject. One departure from RFC 8259 is deliberate: bytes inside a string need not be
 * UTF-8. File names on Linux are bytes, a data.path of Latin-1 bytes goes into the run's
 * config.json as it is (cJSON writes them unescaped), and a resume must read it back. */
#include "st_common.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <strings.h>

/* End of the number starting at s[i] ('-' or a digit), or (size_t)-1 with *why set. */
static size_t number_end(const char *s, size_t len, size_t i, const char **why) {
    size_t j = i + (s[i] == '-');
    if (j + 1 < len && s[j] == '0' && isdigit((unsigned char)s[j + 1])) {
        *why = "a number with a leading zero";
        return (size_t)-1;
    }
    while (j < len && isdigit((unsigned char)s[j])) j++;
    if (j < len && s[j] == '.') {
        if (j + 1 >= len || !isdigit((unsigned char)s[j + 1])) {
            *why = "a number with no digit after its '.'";
            return (size_t)-1;
        }
        j++;
        while (j < len && isdigit((unsigned char)s[j])) j++;
    }
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {   /* the exponent may have leading zeros */
        j++;
        if (j < len && (s[j] == '+' || s[j] == '-')) j++;
        while (j < len && isdigit((unsigned char)s[j])) j++;
    }
    return j;
}

size_t st_json_strict_check(const char *s, size_t len, const char **why) {
    int in_string = 0;
    size_t depth = 0;
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (in_string) {
            if (c == '"') in_string = 0;
            else if (c < 0x20) { *why = "a control character inside a string (escape it, e.g. \\t)"; return i; }
            else if (c == '\\' && i + 1 < len) {
                if (s[i + 1] == 'u' && i + 5 < len && strncasecmp(s + i + 2, "0000", 4) == 0) {
                    *why = "\\u0000 inside a string (a NUL character)";
                    return i;
                }
                i++;   /* the escaped character: '"' or '\\' must not end or start anything */
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > CJSON_NESTING_LIMIT) {
                *why = "arrays and objects nested deeper than 1000 levels";
                return i;
            }
        } else if (c == ']' || c == '}') {
            depth -= depth > 0;
        } else if (c == '-' || isdigit(c)) {
            const size_t end = number_end(s, len, i, why);
            if (end == (size_t)-1) return i;
            i = end - 1;
        }
    }
    return (size_t)-1;
}
