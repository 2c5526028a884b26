/*
 * out.c - sheafctl's output helpers: a streaming JSON writer (valid JSON
 * whatever bytes a name holds: control characters escaped, invalid UTF-8
 * replaced by U+FFFD) and human formats for sizes, durations and times.
 */
#include <math.h>
#include <string.h>
#include <time.h>
#include "client/sheafctl/sheafctl.h"

void jw_init(struct jw *w, FILE *f, int pretty)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->pretty = pretty;
	w->first[0] = 1;
}

/* Length of the valid UTF-8 sequence at @s (1..4), or 0. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

	if (s[0] >= 0xf5)
		return 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

static void put_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str != NULL ? str : "");

	fputc('"', f);
	while (*s != '\0') {
		int n;

		if (*s == '"' || *s == '\\') {
			fputc('\\', f);
			fputc(*s++, f);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
		} else if (*s < 0x80) {
			fputc(*s++, f);
		} else if ((n = utf8_len(s)) > 0) {
			fwrite(s, 1, (size_t)n, f);
			s += n;
		} else {
			fputs("\\ufffd", f);
			s++;
		}
	}
	fputc('"', f);
}

/* The separator, indentation and key before a value. */
static void jw_key(struct jw *w, const char *key)
{
	if (w->depth > 0) {
		if (!w->first[w->depth])
			fputc(',', w->f);
		if (w->pretty)
			fprintf(w->f, "\n%*s", 2 * w->depth, "");
	}
	w->first[w->depth] = 0;
	if (key != NULL) {
		put_string(w->f, key);
		fputs(w->pretty ? ": " : ":", w->f);
	}
}

static void jw_open(struct jw *w, const char *key, char open)
{
	jw_key(w, key);
	fputc(open, w->f);
	if (w->depth + 1 < (int)(sizeof(w->first) / sizeof(w->first[0])))
		w->depth++;
	w->first[w->depth] = 1;
}

void jw_obj(struct jw *w, const char *key)
{
	jw_open(w, key, '{');
}

void jw_arr(struct jw *w, const char *key)
{
	jw_open(w, key, '[');
}

void jw_end(struct jw *w, char close)
{
	int empty = w->first[w->depth];

	if (w->depth > 0)
		w->depth--;
	if (w->pretty && !empty)
		fprintf(w->f, "\n%*s", 2 * w->depth, "");
	fputc(close, w->f);
}

void jw_str(struct jw *w, const char *key, const char *v)
{
	jw_key(w, key);
	put_string(w->f, v);
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jw_i64(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	fprintf(w->f, "%lld", (long long)v);
}

void jw_num(struct jw *w, const char *key, double v)
{
	jw_key(w, key);
	if (isfinite(v))
		fprintf(w->f, "%.10g", v);
	else
		fputs("null", w->f);
}

void jw_bool(struct jw *w, const char *key, int v)
{
	jw_key(w, key);
	fputs(v ? "true" : "false", w->f);
}

void jw_done(struct jw *w)
{
	fputc('\n', w->f);
	fflush(w->f);
}

void jw_cache_info(struct jw *w, const char *key, const Sheaf__V1__CacheInfo *ci)
{
	jw_obj(w, key);
	jw_u64(w, "id", ci->id);
	jw_str(w, "name", ci->name);
	jw_u64(w, "object_size", ci->object_size);
	jw_u64(w, "align", ci->align);
	jw_u64(w, "objects_per_slab", ci->objects_per_slab);
	jw_u64(w, "sheaf_capacity", ci->sheaf_capacity);
	jw_u64(w, "min_partial", ci->min_partial);
	jw_u64(w, "barn_low", ci->barn_low);
	jw_u64(w, "barn_high", ci->barn_high);
	jw_u64(w, "barn_limit", ci->barn_limit);
	jw_u64(w, "flags", ci->flags);
	jw_bool(w, "debug", (ci->flags & 1u) != 0);
	jw_end(w, '}');
}

const char *fmt_iec(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

const char *fmt_duration(char *buf, size_t len, uint64_t secs)
{
	unsigned long long d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60,
			   s = secs % 60;

	if (d > 0)
		snprintf(buf, len, "%llud %02llu:%02llu:%02llu", d, h, m, s);
	else
		snprintf(buf, len, "%02llu:%02llu:%02llu", h, m, s);
	return buf;
}

const char *fmt_time(char *buf, size_t len, uint64_t epoch)
{
	time_t t = (time_t)epoch;
	struct tm tm;

	if (localtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, len, "%llu", (unsigned long long)epoch);
	return buf;
}
