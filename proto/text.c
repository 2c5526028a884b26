/* text.c - the escaped form of names and messages (text.h). */
#include <stdint.h>
#include <string.h>
#include "proto/text.h"

/* Length of the well-formed UTF-8 sequence at @s (2..4; never 1: ASCII is
 * the caller's), with its code point in *@cp, or 0. */
static int utf8_seq(const unsigned char *s, uint32_t *cp)
{
	int n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
		s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	uint32_t v = n == 2 ? s[0] & 0x1fu : n == 3 ? s[0] & 0x0fu : s[0] & 0x07u;

	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;        /* also stops at the NUL */
		v = v << 6 | (s[i] & 0x3fu);
	}
	if (n == 0 || (n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;                /* overlong, surrogate, out of range */
	*cp = v;
	return n;
}

/* Whether code point @cp changes how the text around it is shown. */
static int shows_as_control(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c ||
	       cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

/* The escape of byte @c alone into @e (at most 4 chars and a NUL): its
 * length; 0 when @c is kept as it is. */
static int byte_escape(unsigned char c, char *e)
{
	static const char hex[] = "0123456789abcdef";

	switch (c) {
	case '\\': memcpy(e, "\\\\", 3); return 2;
	case '\n': memcpy(e, "\\n", 3); return 2;
	case '\r': memcpy(e, "\\r", 3); return 2;
	case '\t': memcpy(e, "\\t", 3); return 2;
	default:
		break;
	}
	if (c >= 0x20 && c < 0x7f)
		return 0;
	e[0] = '\\';
	e[1] = 'x';
	e[2] = hex[c >> 4];
	e[3] = hex[c & 15];
	e[4] = '\0';
	return 4;
}

/*
 * Escape @in into @out (@outlen bytes; @out NULL: count only), stopping
 * the output before the first piece (kept bytes, or one escape) that does
 * not fit whole with the NUL.  Returns the whole escaped length.
 */
static size_t escape_walk(char *out, size_t outlen, const char *in)
{
	const unsigned char *s = (const unsigned char *)(in != NULL ? in : "");
	size_t len = 0, used = 0;
	int full = out == NULL;

	while (*s != '\0') {
		char e[5];
		const char *piece = e;
		uint32_t cp;
		int n = *s >= 0x80 ? utf8_seq(s, &cp) : 0, m;

		if (n > 0 && !shows_as_control(cp)) {
			piece = (const char *)s;         /* kept whole */
			m = n;
		} else if ((m = byte_escape(*s, e)) == 0) {
			piece = (const char *)s;         /* one plain byte */
			m = 1;
		}
		/* A kept sequence advances by its length, anything else by
		 * its one byte. */
		s += n > 0 && piece == (const char *)s ? (size_t)n : 1;
		len += (size_t)m;
		if (!full && used + (size_t)m < outlen) {
			memcpy(out + used, piece, (size_t)m);
			used += (size_t)m;
		} else {
			full = 1;
		}
	}
	if (out != NULL)
		out[used] = '\0';
	return len;
}

char *text_escape(char *out, size_t outlen, const char *in)
{
	(void)escape_walk(out, outlen, in);
	return out;
}

size_t text_escaped_len(const char *in)
{
	return escape_walk(NULL, 0, in);
}
