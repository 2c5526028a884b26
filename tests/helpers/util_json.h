/*
 * util_json.h - a small strict JSON reader (RFC 8259) for tests that check
 * machine-readable output (sheafctl -o json): parse a document into a tree,
 * then look fields up by name and type.  The lookups and json_parse fail
 * the test (REQUIRE) on a missing field, a wrong type or invalid JSON.
 */
#ifndef SHEAF_TESTS_UTIL_JSON_H
#define SHEAF_TESTS_UTIL_JSON_H

#include <stddef.h>
#include <stdint.h>

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype t;
	int b;
	char *s;                     /* J_STR: the string; J_NUM: its text */
	size_t n;                    /* J_ARR/J_OBJ: members */
	struct jv **v;
	char **k;                    /* J_OBJ: keys */
};

/* Parse a whole document (surrounding whitespace allowed): the tree, or
 * NULL with the reason in @err. */
struct jv *json_try_parse(const char *text, char *err, size_t len);
/* The same, failing the test on invalid JSON. */
struct jv *json_parse(const char *text);
void jv_free(struct jv *v);

/* Member @key of object @o, or NULL. */
struct jv *jget(const struct jv *o, const char *key);
/* Member @key, required to exist with type @t. */
struct jv *jreq(const struct jv *o, const char *key, enum jtype t);
uint64_t ju64(const struct jv *o, const char *key);    /* an unsigned integer */
double jnum(const struct jv *o, const char *key);
const char *jstr(const struct jv *o, const char *key);
int jbool(const struct jv *o, const char *key);
struct jv *jarr(const struct jv *o, const char *key);
/* The element of array @a whose "name" is @name (required). */
struct jv *jnamed(const struct jv *a, const char *name);

#endif
