/*
 * util_json.c - the JSON reader of util_json.h: recursive descent, strict
 * (no trailing commas, no duplicate keys, no lone surrogates, no control
 * characters in strings); numbers are kept as their text.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"

struct jp {
	const char *p;
	char err[160];
};

static struct jv *jp_value(struct jp *p, int depth);

void jv_free(struct jv *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(v->v[i]);
		if (v->k != NULL)
			free(v->k[i]);
	}
	free(v->v);
	free(v->k);
	free(v->s);
	free(v);
}

static struct jv *jp_fail(struct jp *p, const char *what)
{
	if (p->err[0] == '\0')
		snprintf(p->err, sizeof(p->err), "%s at '%.20s'", what, p->p);
	return NULL;
}

static void jp_ws(struct jp *p)
{
	while (*p->p == ' ' || *p->p == '\t' || *p->p == '\n' || *p->p == '\r')
		p->p++;
}

static void put_utf8(char **o, unsigned cp)
{
	char *s = *o;
	if (cp < 0x80) {
		*s++ = (char)cp;
	} else if (cp < 0x800) {
		*s++ = (char)(0xc0 | cp >> 6);
		*s++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*s++ = (char)(0xe0 | cp >> 12);
		*s++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*s++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*s++ = (char)(0xf0 | cp >> 18);
		*s++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*s++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*s++ = (char)(0x80 | (cp & 0x3f));
	}
	*o = s;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		int c = s[i];
		if (!isxdigit(c))
			return -1;
		v = v * 16 + (unsigned)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
	}
	*out = v;
	return 0;
}

static char *jp_string(struct jp *p)
{
	const char *s = p->p + 1;
	char *out, *o;

	if (*p->p != '"') {
		jp_fail(p, "expected a string");
		return NULL;
	}
	out = o = malloc(strlen(s) * 3 + 4);
	while (*s != '"') {
		unsigned cp, lo;
		if ((unsigned char)*s < 0x20) {
			jp_fail(p, "control character in string");
			goto bad;
		}
		if (*s != '\\') {
			*o++ = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case '"': case '\\': case '/': *o++ = *s; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (hex4(s + 1, &cp) != 0) {
				jp_fail(p, "bad \\u escape");
				goto bad;
			}
			s += 4;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (s[1] != '\\' || s[2] != 'u' || hex4(s + 3, &lo) != 0 ||
				    lo < 0xdc00 || lo > 0xdfff) {
					jp_fail(p, "lone surrogate");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			}
			put_utf8(&o, cp);
			break;
		default:
			jp_fail(p, "bad escape");
			goto bad;
		}
		s++;
	}
	*o = '\0';
	p->p = s + 1;
	return out;
bad:
	free(out);
	return NULL;
}

static struct jv *jv_new(enum jtype t)
{
	struct jv *v = calloc(1, sizeof(*v));
	v->t = t;
	return v;
}

static struct jv *jp_number(struct jp *p)
{
	const char *s = p->p, *start = s;
	struct jv *v;

	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (isdigit((unsigned char)*s))
			s++;
	else
		return jp_fail(p, "bad number");
	if (*s == '.') {
		if (!isdigit((unsigned char)*++s))
			return jp_fail(p, "bad fraction");
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return jp_fail(p, "bad exponent");
		while (isdigit((unsigned char)*s))
			s++;
	}
	v = jv_new(J_NUM);
	v->s = strndup(start, (size_t)(s - start));
	p->p = s;
	return v;
}

static void jv_push(struct jv *c, char *key, struct jv *item)
{
	c->v = realloc(c->v, (c->n + 1) * sizeof(*c->v));
	if (c->t == J_OBJ)
		c->k = realloc(c->k, (c->n + 1) * sizeof(*c->k));
	c->v[c->n] = item;
	if (c->t == J_OBJ)
		c->k[c->n] = key;
	c->n++;
}

static struct jv *jp_container(struct jp *p, int depth, char close)
{
	struct jv *c = jv_new(close == '}' ? J_OBJ : J_ARR);

	p->p++;
	jp_ws(p);
	if (*p->p == close) {
		p->p++;
		return c;
	}
	for (;;) {
		char *key = NULL;
		struct jv *item;

		jp_ws(p);
		if (close == '}') {
			if ((key = jp_string(p)) == NULL)
				goto bad;
			for (size_t i = 0; i < c->n; i++)
				if (strcmp(c->k[i], key) == 0) {
					free(key);
					jp_fail(p, "duplicate key");
					goto bad;
				}
			jp_ws(p);
			if (*p->p != ':') {
				free(key);
				jp_fail(p, "expected ':'");
				goto bad;
			}
			p->p++;
		}
		if ((item = jp_value(p, depth + 1)) == NULL) {
			free(key);
			goto bad;
		}
		jv_push(c, key, item);
		jp_ws(p);
		if (*p->p == ',') {
			p->p++;
			continue;
		}
		if (*p->p == close) {
			p->p++;
			return c;
		}
		jp_fail(p, "expected ',' or a closing bracket");
		goto bad;
	}
bad:
	jv_free(c);
	return NULL;
}

static struct jv *jp_value(struct jp *p, int depth)
{
	struct jv *v;

	if (depth > 64)
		return jp_fail(p, "too deep");
	jp_ws(p);
	switch (*p->p) {
	case '{': return jp_container(p, depth, '}');
	case '[': return jp_container(p, depth, ']');
	case '"':
		v = jv_new(J_STR);
		if ((v->s = jp_string(p)) == NULL) {
			jv_free(v);
			return NULL;
		}
		return v;
	case 't': case 'f': case 'n': {
		const char *lit = *p->p == 't' ? "true" : *p->p == 'f' ? "false" : "null";
		if (strncmp(p->p, lit, strlen(lit)) != 0)
			return jp_fail(p, "bad literal");
		v = jv_new(*p->p == 'n' ? J_NULL : J_BOOL);
		v->b = *p->p == 't';
		p->p += strlen(lit);
		return v;
	}
	default:
		return jp_number(p);
	}
}

struct jv *json_try_parse(const char *text, char *err, size_t len)
{
	struct jp p = { .p = text };
	struct jv *v = jp_value(&p, 0);

	if (v != NULL) {
		jp_ws(&p);
		if (*p.p != '\0') {
			jv_free(v);
			v = jp_fail(&p, "trailing text");
		}
	}
	if (v == NULL && len > 0)
		snprintf(err, len, "%s", p.err);
	return v;
}

struct jv *json_parse(const char *text)
{
	char err[160];
	struct jv *v = json_try_parse(text, err, sizeof(err));

	REQUIRE(v != NULL, "invalid JSON (%s):\n%s", err, text);
	return v;
}

struct jv *jget(const struct jv *o, const char *key)
{
	REQUIRE(o != NULL && o->t == J_OBJ, "not an object looking up '%s'", key);
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->k[i], key) == 0)
			return o->v[i];
	return NULL;
}

struct jv *jreq(const struct jv *o, const char *key, enum jtype t)
{
	struct jv *v = jget(o, key);
	REQUIRE(v != NULL, "JSON field '%s' missing", key);
	REQUIRE(v->t == t, "JSON field '%s' has type %d, expected %d", key, v->t, t);
	return v;
}

uint64_t ju64(const struct jv *o, const char *key)
{
	struct jv *v = jreq(o, key, J_NUM);
	char *end;
	unsigned long long x;

	REQUIRE(isdigit((unsigned char)v->s[0]), "'%s' = %s: not an unsigned integer", key, v->s);
	errno = 0;
	x = strtoull(v->s, &end, 10);
	REQUIRE(*end == '\0' && errno == 0, "'%s' = %s: not an unsigned integer", key, v->s);
	return x;
}

double jnum(const struct jv *o, const char *key)
{
	return strtod(jreq(o, key, J_NUM)->s, NULL);
}

const char *jstr(const struct jv *o, const char *key)
{
	return jreq(o, key, J_STR)->s;
}

int jbool(const struct jv *o, const char *key)
{
	return jreq(o, key, J_BOOL)->b;
}

struct jv *jarr(const struct jv *o, const char *key)
{
	return jreq(o, key, J_ARR);
}

struct jv *jnamed(const struct jv *a, const char *name)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->t == J_OBJ && jget(a->v[i], "name") != NULL &&
		    strcmp(jstr(a->v[i], "name"), name) == 0)
			return a->v[i];
	REQUIRE(0, "no element named '%s'", name);
	return NULL;
}
