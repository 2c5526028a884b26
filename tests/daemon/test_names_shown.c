/*
 * test_names_shown.c - names are data, not markup: cache, queue, object and
 * client names holding a newline, an escape sequence, a literal "\x00"
 * (NUL-looking), bytes of no UTF-8 or the most bytes a name may have reach
 * sheafd's log and sheafctl's tables and messages in the escaped form of
 * proto/text.h (one log line each, no control byte), and sheafctl's JSON
 * with their exact bytes.  The escaping itself (every rule of text.h) is
 * checked first, without a daemon.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/text.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

/* A forged log line, a terminal's clear-screen and title sequences. */
#define FORGED   "evil\nsheafd error: forged"
#define ESCSEQ   "x\x1b[2J\x1b]0;t\x07"
#define NULLIKE  "a\\x00b"

START_TEST(test_escape_rules)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "plain-name_1.2", "plain-name_1.2" },
		{ FORGED, "evil\\nsheafd error: forged" },
		{ ESCSEQ, "x\\x1b[2J\\x1b]0;t\\x07" },
		{ NULLIKE, "a\\\\x00b" },
		{ "\r\t\x7f\x01", "\\r\\t\\x7f\\x01" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "\xc2\x9b" "1m", "\\xc2\\x9b1m" },                /* C1 CSI */
		{ "a\xe2\x80\xa8" "b", "a\\xe2\\x80\\xa8b" },        /* U+2028 */
		{ "\xe2\x80\xae" "abc", "\\xe2\\x80\\xaeabc" },       /* U+202E */
		{ "\xff\xc3(\xc0\xaf\xed\xa0\x80", "\\xff\\xc3(\\xc0\\xaf\\xed\\xa0\\x80" },
		{ "\xe2\x82", "\\xe2\\x82" },                        /* cut short */
	};
	char out[TEXT_ESCAPED_MAX(64)], small[8];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		text_escape(out, sizeof(out), cases[i].in);
		ck_assert_str_eq(out, cases[i].out);
		ck_assert_uint_eq(text_escaped_len(cases[i].in), strlen(cases[i].out));
	}
	/* An escape that does not fit is left out whole. */
	ck_assert_str_eq(text_escape(small, sizeof(small), "abcd\x1b"), "abcd");
	ck_assert_str_eq(text_escape(small, sizeof(small), NULL), "");
	/* The bound: one byte, at most four characters. */
	memset(out, 0, sizeof(out));
	{
		char all[64];

		memset(all, 0x1b, sizeof(all) - 1);
		all[sizeof(all) - 1] = '\0';
		ck_assert_uint_eq(text_escaped_len(all), 4 * (sizeof(all) - 1));
		ck_assert_uint_eq(strlen(text_escape(out, sizeof(out), all)), 4 * (sizeof(all) - 1));
	}
}
END_TEST

/* No byte of @text is a control byte but its newlines. */
static void require_no_controls(const char *text, const char *what)
{
	for (const unsigned char *s = (const unsigned char *)text; *s != '\0'; s++)
		REQUIRE(*s == '\n' || (*s >= 0x20 && *s != 0x7f),
			"%s holds control byte %#x at %zu:\n%s", what, *s,
			(size_t)(s - (const unsigned char *)text), text);
}

/* Every line of sheafd's log is one of its own: it starts with a time. */
static void require_log_lines(const char *log)
{
	for (const char *l = log; *l != '\0';) {
		const char *nl = strchr(l, '\n');

		REQUIRE(l[0] >= '0' && l[0] <= '9' && strncmp(l, "sheafd error: forged", 20) != 0,
			"a log line that is not sheafd's: %.*s", (int)(nl ? nl - l : 80), l);
		if (nl == NULL)
			break;
		l = nl + 1;
	}
}

START_TEST(test_log_escapes_names)
{
	char err[256], *log;
	char longest[SHEAF_CACHE_NAME_MAX + 1];
	struct dmn L;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_queue_t *q;

	dmn_init(&L);                        /* a daemon of its own: debug log */
	dmn_start(&L, NULL);
	p = sheaf_connect(L.sock, "client " ESCSEQ " " FORGED, 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	c = sheaf_cache_create(p, FORGED, 64, NULL);
	REQUIRE(c != NULL, "cache create: %s", strerror(errno));
	REQUIRE(sheaf_cache_create(p, ESCSEQ, 64, NULL) != NULL, "cache create: %s", strerror(errno));
	REQUIRE(sheaf_cache_create(p, NULLIKE, 64, NULL) != NULL, "cache create: %s",
		strerror(errno));
	memset(longest, 0x1b, sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	REQUIRE(sheaf_cache_create(p, longest, 64, NULL) != NULL, "cache create: %s",
		strerror(errno));
	{
		/* One byte over: refused, before anything is logged of it. */
		char over[SHEAF_CACHE_NAME_MAX + 2];

		memset(over, '\n', sizeof(over) - 1);
		over[sizeof(over) - 1] = '\0';
		errno = 0;
		REQUIRE(sheaf_cache_create(p, over, 64, NULL) == NULL && errno == EINVAL,
			"an overlong cache name: %s", strerror(errno));
	}
	q = sheaf_queue_create(p, "queue " FORGED, 0, 0);
	REQUIRE(q != NULL, "queue create: %s", strerror(errno));
	REQUIRE(sheaf_queue_destroy(q) == 0, "queue destroy");
	sheaf_disconnect(p);

	dmn_stop(&L, 5000);
	log = read_file(L.log);
	REQUIRE(log != NULL, "read %s", L.log);
	require_no_controls(log, "sheafd's log");
	require_log_lines(log);
	REQUIRE(strstr(log, "cache 'evil\\nsheafd error: forged' created") != NULL, "cache:\n%s", log);
	REQUIRE(strstr(log, "cache 'x\\x1b[2J\\x1b]0;t\\x07' created") != NULL, "esc:\n%s", log);
	REQUIRE(strstr(log, "cache 'a\\\\x00b' created") != NULL, "nul-like:\n%s", log);
	REQUIRE(strstr(log, "queue 'queue evil\\nsheafd error: forged' created") != NULL,
		"queue:\n%s", log);
	REQUIRE(strstr(log, "queue 'queue evil\\nsheafd error: forged' destroyed") != NULL,
		"queue destroy:\n%s", log);
	REQUIRE(strstr(log, "name 'client x\\x1b[2J\\x1b]0;t\\x07 evil\\nsheafd error: forged'")
		!= NULL, "client:\n%s", log);
	{
		/* The longest name, escaped whole. */
		char want[TEXT_ESCAPED_MAX(SHEAF_CACHE_NAME_MAX) + 16];

		snprintf(want, sizeof(want), "cache '%s' created",
			 text_escape((char[TEXT_ESCAPED_MAX(SHEAF_CACHE_NAME_MAX)]){ 0 },
				     TEXT_ESCAPED_MAX(SHEAF_CACHE_NAME_MAX), longest));
		REQUIRE(strstr(log, want) != NULL, "longest:\n%s", log);
	}
	free(log);
	dmn_cleanup(&L);
}
END_TEST

/* A client process that holds a pool with names to show, until killed. */
struct holder {
	const char *sock;
	int ready[2];
};

static int hold_names(void *arg)
{
	struct holder *h = arg;
	const struct sheaf_cache_config owned = { .flags = SHEAF_CACHE_OWNED,
						  .capacity = SHEAF_CAPACITY_DEFAULT };
	char err[256];
	sheaf_pool_t *p = sheaf_connect(h->sock, "client " ESCSEQ, 0, err, sizeof(err));
	sheaf_cache_t *c = p != NULL ? sheaf_cache_create(p, FORGED, 64, &owned) : NULL;
	sheaf_cache_t *n = p != NULL ? sheaf_cache_create(p, NULLIKE, 64, NULL) : NULL;
	void *o1 = c != NULL ? sheaf_alloc(c) : NULL, *o2 = n != NULL ? sheaf_alloc(n) : NULL;
	char too_long[SHEAF_NAME_LEN_MAX + 2];

	if (o1 == NULL || o2 == NULL || sheaf_queue_create(p, "q " ESCSEQ, 0, 0) == NULL ||
	    sheaf_name_set(p, "obj " FORGED, o1) != 0 || sheaf_name_set(p, NULLIKE, o2) != 0)
		return 1;
	memset(too_long, 'n', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	if (sheaf_name_set(p, too_long, o1) != -ENAMETOOLONG)
		return 2;
	if (write(h->ready[1], "r", 1) != 1)
		return 3;
	pause();
	return 0;
}

START_TEST(test_tables_escape_names)
{
	static char *const cmds[][3] = {
		{ "caches", NULL }, { "names", NULL }, { "queues", NULL }, { "clients", NULL },
		{ "stats", NULL }, { "top", "-o" }, { "shrink", FORGED },
	};
	struct holder h = { .sock = D.sock };
	struct run r;
	struct jv *v;
	char ch;
	pid_t pid;

	ck_assert_int_eq(pipe(h.ready), 0);
	pid = fork_child(hold_names, &h);
	REQUIRE(read(h.ready[0], &ch, 1) == 1, "the holder failed");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (cmds[i][1] != NULL)
			run_argv(&r, 1, (char *[]){ cmds[i][0], cmds[i][1], NULL });
		else
			run_argv(&r, 1, (char *[]){ cmds[i][0], NULL });
		expect(&r, 0, cmds[i][0]);
		require_no_controls(r.out, cmds[i][0]);
		REQUIRE(strstr(r.out, "\nsheafd error: forged") == NULL, "%s: a forged line:\n%s",
			cmds[i][0], r.out);
		run_free(&r);
	}
	CTL(&r, "caches");
	REQUIRE(strstr(r.out, "evil\\nsheafd error: forged") != NULL &&
		strstr(r.out, "a\\\\x00b") != NULL, "caches:\n%s", r.out);
	run_free(&r);
	CTL(&r, "names");
	REQUIRE(strstr(r.out, "obj evil\\nsheafd error: forged") != NULL &&
		strstr(r.out, "a\\\\x00b") != NULL, "names:\n%s", r.out);
	run_free(&r);
	CTL(&r, "queues");
	REQUIRE(strstr(r.out, "q x\\x1b[2J\\x1b]0;t\\x07") != NULL, "queues:\n%s", r.out);
	run_free(&r);
	CTL(&r, "clients");
	REQUIRE(strstr(r.out, "client x\\x1b[2J\\x1b]0;t\\x07") != NULL &&
		strstr(r.out, "evil\\nsheafd error: forged=1") != NULL, "clients:\n%s", r.out);
	run_free(&r);
	/* A refusal quoting a name: one escaped line on stderr. */
	CTL(&r, "destroy", FORGED);
	expect(&r, 1, "destroy of a cache in use");
	require_no_controls(r.err, "destroy's message");
	REQUIRE(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "more than one line:\n%s", r.err);
	run_free(&r);

	/* JSON keeps the exact bytes. */
	v = CTLJ("names");
	jnamed(jarr(v, "names"), "obj " FORGED);
	jnamed(jarr(v, "names"), NULLIKE);
	jv_free(v);
	v = CTLJ("caches");
	jnamed(jarr(v, "caches"), FORGED);
	jv_free(v);
	v = CTLJ("clients");
	REQUIRE(strcmp(jstr(jarr(v, "clients")->v[0], "name"), "client " ESCSEQ) == 0,
		"clients json");
	jv_free(v);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(h.ready[0]);
	close(h.ready[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("names_shown");

	require_binaries("test_names_shown");
	ADD_ALONE(s, test_escape_rules, 30);
	ADD_ALONE(s, test_log_escapes_names, 60);
	ctl_add(s, "tables_escape_names", test_tables_escape_names, 60);
	return run_suite(s);
}
