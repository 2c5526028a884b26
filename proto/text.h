/*
 * text.h - names as data: the one escaping that sheafd's log and
 * sheafctl's tables apply to every name (cache, queue, object, client) and
 * to every message that may carry one, so that no name can end a log line
 * (and forge the next journald entry) or send a control sequence to the
 * operator's terminal.  JSON output has its own exact escaping
 * (client/sheafctl/out.c); this is for text read by people.
 *
 * The escaped form (sheafd(8), sheafctl(1)):
 *   - printable ASCII (0x20..0x7e) is kept, but '\' becomes "\\";
 *   - newline, carriage return and tab become "\n", "\r", "\t"; every
 *     other byte below 0x20, and 0x7f, becomes "\xHH" (ESC: "\x1b");
 *   - well-formed UTF-8 is kept, but for the code points that control
 *     how text is shown: the C1 controls (U+0080..U+009F), the line and
 *     paragraph separators (U+2028, U+2029) and the bidirectional
 *     controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069),
 *     whose bytes become "\xHH" each;
 *   - every byte that is not part of well-formed UTF-8 becomes "\xHH".
 * Since a backslash is always doubled, the escaped form reads back to the
 * exact bytes.  One input byte gives at most 4 characters.
 *
 * Part of libsheaf (hidden), linked by sheafd and sheafctl; never prints.
 */
#ifndef SHEAF_PROTO_TEXT_H
#define SHEAF_PROTO_TEXT_H

#include <stddef.h>

/* Bytes that always hold the escaped form of @n input bytes, and its NUL. */
#define TEXT_ESCAPED_MAX(n) (4 * (size_t)(n) + 1)

/*
 * Write the escaped form of the NUL-terminated @in (NULL: "") to @out
 * (@outlen bytes, > 0), always NUL-terminated; an escape that does not fit
 * whole is left out with everything after it.  Returns @out.
 */
char *text_escape(char *out, size_t outlen, const char *in);

/* Length of @in's escaped form, without the NUL (column widths). */
size_t text_escaped_len(const char *in);

#endif
