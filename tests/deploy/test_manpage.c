/*
 * test_manpage.c - the man pages against what they describe: sheafctl(1)
 * and sheafd(8) against the programs' own --help, libsheaf(3) against
 * sheaf.h.
 *
 *   global_options  the options of `sheafctl --help` are the GLOBAL OPTIONS
 *                   of docs/sheafctl.1;
 *   commands        the commands of `sheafctl --help` are the COMMANDS
 *                   subsections of the page;
 *   command_options for each command, the options of `sheafctl CMD --help`
 *                   are those the page lists for it (the .TP entries of its
 *                   subsections) plus the global ones every command takes
 *                   (all but --version; where the command has a short
 *                   option of the same letter, the global one by its long
 *                   name only, as the page says);
 *   summary_options `sheafctl --help` names every option of each command
 *                   in that command's line;
 *   detects_a_gap   the comparison itself: a copy of the page without one
 *                   of create's options must fail it;
 *   sheafd_options  the options of `sheafd --help` are the OPTIONS of
 *                   docs/sheafd.8;
 *   libsheaf_synopsis  the functions sheaf.h declares (SHEAF_API, the
 *                   deprecated ones too) are those of the SYNOPSIS of
 *                   docs/libsheaf.3.
 * An option is compared with its pairing: "-d|--delay", "--socket", "-h|--help".
 */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"

#define SET_MAX  128
#define NAME_LEN 48

struct set {
	int n;
	char s[SET_MAX][NAME_LEN];
};

static void set_add(struct set *t, const char *v)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->s[i], v) == 0)
			return;
	REQUIRE(t->n < SET_MAX, "more than %d entries", SET_MAX);
	REQUIRE(strlen(v) < NAME_LEN, "entry too long: %s", v);
	strcpy(t->s[t->n++], v);
}

static int set_has(const struct set *t, const char *v)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->s[i], v) == 0)
			return 1;
	return 0;
}

/* Append to @msg the entries of @a missing from @b, after @label. */
static int set_missing(const struct set *a, const struct set *b, const char *label,
		       char *msg, size_t len)
{
	int miss = 0;

	for (int i = 0; i < a->n; i++) {
		if (set_has(b, a->s[i]))
			continue;
		if (miss++ == 0)
			snprintf(msg + strlen(msg), len - strlen(msg), " %s:", label);
		snprintf(msg + strlen(msg), len - strlen(msg), " %s", a->s[i]);
	}
	return miss;
}

/* Mismatches of @help and @man (0: equal), described in @msg. */
static int set_compare(const struct set *help, const struct set *man, char *msg, size_t len)
{
	msg[0] = '\0';
	return set_missing(help, man, "in --help but not in the page", msg, len) +
	       set_missing(man, help, "in the page but not in --help", msg, len);
}

/* ---- reading --help ------------------------------------------------------------- */

/* Output (stdout and stderr) of program @bin with @args; requires exit
 * status 0. */
static char *program_out(const char *bin, const char *args)
{
	char cmd[PATH_MAX + 128];
	size_t cap = 1 << 16, n = 0, k;
	char *out = malloc(cap);
	FILE *f;
	int st;

	REQUIRE(out != NULL, "out of memory");
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", bin, args);
	f = popen(cmd, "r");
	REQUIRE(f != NULL, "popen %s", cmd);
	while ((k = fread(out + n, 1, cap - 1 - n, f)) > 0)
		n += k;
	out[n] = '\0';
	st = pclose(f);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s: status %d:\n%s", bin, args, st,
		out);
	return out;
}

static char *sheafctl_out(const char *args)
{
	return program_out(sheafctl_bin(), args);
}

/* The option at @p ("-d, --delay N", "--socket PATH", "-h"): "-d|--delay". */
static int option_key(const char *p, char *key, size_t len)
{
	char sh[3] = "", lg[NAME_LEN] = "";

	if (p[0] == '-' && isalpha((unsigned char)p[1]) &&
	    (p[2] == ',' || p[2] == ' ' || p[2] == '\0' || p[2] == '\n')) {
		memcpy(sh, p, 2);
		p += 2;
		while (*p == ',' || *p == ' ')
			p++;
	}
	if (p[0] == '-' && p[1] == '-' && isalpha((unsigned char)p[2])) {
		size_t n = strspn(p, "-abcdefghijklmnopqrstuvwxyz0123456789");

		if (n >= sizeof(lg))
			return 0;
		memcpy(lg, p, n);
		lg[n] = '\0';
	}
	if (sh[0] == '\0' && lg[0] == '\0')
		return 0;
	snprintf(key, len, "%s%s%s", sh, sh[0] && lg[0] ? "|" : "", lg);
	return 1;
}

/* The options of a --help text: its lines "  -x, --long ..." and
 * "      --long ...". */
static void help_options(const char *text, struct set *out)
{
	const char *l = text;

	out->n = 0;
	while (*l) {
		const char *e = strchr(l, '\n');
		size_t sp = strspn(l, " ");
		char line[256], key[NAME_LEN];
		size_t n = e ? (size_t)(e - l) : strlen(l);

		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, l, n);
		line[n] = '\0';
		if ((sp == 2 || sp == 6) && line[sp] == '-' && option_key(line + sp, key, sizeof(key)))
			set_add(out, key);
		l = e ? e + 1 : l + strlen(l);
	}
}

/* The commands of `sheafctl --help` (the lines of its Commands list). */
static void help_commands(const char *text, struct set *out)
{
	const char *l = strstr(text, "\nCommands");

	out->n = 0;
	REQUIRE(l != NULL, "sheafctl --help has no Commands list:\n%s", text);
	l = strchr(l + 1, '\n');
	while (l != NULL && l[1] != '\n' && l[1] != '\0') {
		char name[NAME_LEN];
		int k;

		l++;
		if (strncmp(l, "  ", 2) == 0 && islower((unsigned char)l[2]) &&
		    sscanf(l + 2, "%47[a-z]%n", name, &k) == 1)
			set_add(out, name);
		l = strchr(l, '\n');
	}
}

/* The lines of `sheafctl --help` about @cmd: each line starting with it
 * and the lines indented under it, joined. */
static void help_summary(const char *text, const char *cmd, char *out, size_t len)
{
	const char *l = strstr(text, "\nCommands");
	int in = 0;

	out[0] = '\0';
	for (l = l ? strchr(l + 1, '\n') : NULL; l != NULL && l[1] != '\n' && l[1] != '\0';
	     l = strchr(l + 1, '\n')) {
		const char *s = l + 1, *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s), sp = strspn(s, " ");

		if (sp == 2)
			in = strncmp(s + 2, cmd, strlen(cmd)) == 0 &&
			     (s[2 + strlen(cmd)] == ' ' || s[2 + strlen(cmd)] == '\n');
		if (in && strlen(out) + n + 2 < len) {
			strncat(out, s, n);
			strcat(out, "\n");
		}
	}
}

/* ---- reading the page -------------------------------------------------------------- */

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	REQUIRE(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	REQUIRE(buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static char *page_named(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/docs/%s", root_dir(), name);
	return read_text(path);
}

static char *manpage(void)
{
	return page_named("sheafctl.1");
}

/* A roff line as text: the macro name, \f fonts, quotes and the \- escapes
 * gone ("-" for "\-"). */
static void deroff(const char *in, char *out, size_t len)
{
	size_t o = 0;

	if (in[0] == '.')
		in += strcspn(in, " \n");
	for (; *in && *in != '\n' && o + 1 < len; in++) {
		if (in[0] == '\\' && in[1] == '-') {
			out[o++] = '-';
			in++;
		} else if (in[0] == '\\' && in[1] == 'f' && in[2] != '\0') {
			in += 2;
		} else if (in[0] == '\\' && in[1] == '&') {
			in++;
		} else if (*in != '"') {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}

/* The options in a .TP tag line (after deroff). */
static void tag_options(const char *roff, struct set *out)
{
	char text[256], key[NAME_LEN];
	const char *p;

	deroff(roff, text, sizeof(text));
	p = text + strspn(text, " ");
	if (*p == '-' && option_key(p, key, sizeof(key)))
		set_add(out, key);
}

/*
 * Walk the page: the .TP options of section .SH @section (every one) or, with
 * @cmd, of the .SS subsections of COMMANDS whose title starts with @cmd.
 * With @cmds, the names of those subsections instead.
 */
static void page_options(const char *page, const char *section, const char *cmd,
			 struct set *out, struct set *cmds)
{
	char sh[64] = "", ss[NAME_LEN] = "";
	const char *l = page;

	out->n = 0;
	if (cmds != NULL)
		cmds->n = 0;
	while (*l) {
		const char *e = strchr(l, '\n');

		if (strncmp(l, ".SH ", 4) == 0) {
			char t[128];

			deroff(l, t, sizeof(t));
			snprintf(sh, sizeof(sh), "%s", t + strspn(t, " "));
			ss[0] = '\0';
		} else if (strncmp(l, ".SS ", 4) == 0) {
			char t[128];

			deroff(l, t, sizeof(t));
			if (sscanf(t, " %47[a-z]", ss) != 1)
				ss[0] = '\0';
			if (cmds != NULL && strcmp(sh, section) == 0 && ss[0])
				set_add(cmds, ss);
		} else if (strncmp(l, ".TP", 3) == 0 && (l[3] == '\n' || l[3] == ' ') && e != NULL &&
			   strcmp(sh, section) == 0 && (cmd == NULL || strcmp(ss, cmd) == 0)) {
			tag_options(e + 1, out);
		}
		l = e ? e + 1 : l + strlen(l);
	}
}

/* What sheafctl(1) says `sheafctl @cmd --help` lists: the command's own
 * options and the global ones but --version, by their long names alone
 * where the command has a short option of the same letter. */
static void page_command_options(const char *page, const char *cmd, struct set *out)
{
	struct set global;

	page_options(page, "COMMANDS", cmd, out, NULL);
	page_options(page, "GLOBAL OPTIONS", NULL, &global, NULL);
	for (int i = 0; i < global.n; i++) {
		const char *g = global.s[i], *bar = strchr(g, '|');
		int taken = 0;

		if (strcmp(bar ? bar + 1 : g, "--version") == 0)
			continue;
		for (int k = 0; bar != NULL && k < out->n; k++)
			taken |= strncmp(out->s[k], g, 3) == 0 && out->s[k][2] != '-';
		set_add(out, taken ? bar + 1 : g);
	}
}

/* Compare every command's --help with the page @page: mismatches. */
static int compare_commands(const char *page, const char *help, char *msg, size_t len)
{
	struct set cmds, want, got;
	char m[1024];
	int bad = 0;

	msg[0] = '\0';
	help_commands(help, &cmds);
	for (int i = 0; i < cmds.n; i++) {
		char args[NAME_LEN + 16];
		char *out;

		snprintf(args, sizeof(args), "%s --help", cmds.s[i]);
		out = sheafctl_out(args);
		help_options(out, &got);
		free(out);
		page_command_options(page, cmds.s[i], &want);
		if (set_compare(&got, &want, m, sizeof(m)) != 0) {
			snprintf(msg + strlen(msg), len - strlen(msg), "%s:%s\n", cmds.s[i], m);
			bad++;
		}
	}
	return bad;
}

START_TEST(global_options)
{
	char *help = sheafctl_out("--help"), *page = manpage(), m[1024];
	struct set got, want;

	help_options(help, &got);
	page_options(page, "GLOBAL OPTIONS", NULL, &want, NULL);
	REQUIRE(got.n >= 4, "sheafctl --help lists %d options", got.n);
	REQUIRE(set_compare(&got, &want, m, sizeof(m)) == 0, "global options:%s", m);
	printf("  global options: %d, the same in --help and sheafctl(1)\n", got.n);
	free(help);
	free(page);
}
END_TEST

START_TEST(commands)
{
	char *help = sheafctl_out("--help"), *page = manpage(), m[1024];
	struct set got, want, opts;

	help_commands(help, &got);
	page_options(page, "COMMANDS", NULL, &opts, &want);
	REQUIRE(got.n >= 10, "sheafctl --help lists %d commands", got.n);
	REQUIRE(set_compare(&got, &want, m, sizeof(m)) == 0, "commands:%s", m);
	printf("  commands: %d, the same in --help and sheafctl(1)\n", got.n);
	free(help);
	free(page);
}
END_TEST

START_TEST(command_options)
{
	char *help = sheafctl_out("--help"), *page = manpage(), msg[8192];
	int bad = compare_commands(page, help, msg, sizeof(msg));

	REQUIRE(bad == 0, "%d commands differ from sheafctl(1):\n%s", bad, msg);
	printf("  every command's --help lists the options sheafctl(1) gives it\n");
	free(help);
	free(page);
}
END_TEST

START_TEST(summary_options)
{
	char *help = sheafctl_out("--help"), summary[2048];
	struct set cmds, own;
	int checked = 0;

	help_commands(help, &cmds);
	for (int i = 0; i < cmds.n; i++) {
		char args[NAME_LEN + 16];
		char *out;

		snprintf(args, sizeof(args), "%s --help", cmds.s[i]);
		out = sheafctl_out(args);
		help_options(out, &own);
		free(out);
		help_summary(help, cmds.s[i], summary, sizeof(summary));
		REQUIRE(summary[0] != '\0', "sheafctl --help has no line for %s", cmds.s[i]);
		for (int k = 0; k < own.n; k++) {
			const char *o = own.s[k], *bar = strchr(o, '|');
			const char *name = bar ? bar + 1 : o;

			/* the global options: named once, below the list */
			if (strcmp(name, "--socket") == 0 || strcmp(name, "--output") == 0 ||
			    strcmp(name, "--help") == 0)
				continue;
			REQUIRE(strstr(summary, name) != NULL,
				"sheafctl --help does not name %s of %s in:\n%s", name, cmds.s[i],
				summary);
			checked++;
		}
	}
	REQUIRE(checked >= 10, "only %d options of commands checked", checked);
	printf("  sheafctl --help names all %d options of the commands\n", checked);
	free(help);
}
END_TEST

START_TEST(detects_a_gap)
{
	char *help = sheafctl_out("--help"), *page = manpage(), msg[8192];
	char *tp = strstr(page, ".TP\n.B \\-\\-keep\n");
	int bad;

	REQUIRE(tp != NULL, "sheafctl(1) has no .TP entry for create --keep");
	memcpy(tp, ".br\n", 4);             /* .br for .TP: the tag is plain text */
	bad = compare_commands(page, help, msg, sizeof(msg));
	REQUIRE(bad == 1 && strstr(msg, "create:") && strstr(msg, "--keep"),
		"without create --keep the page still matched (%d):\n%s", bad, msg);
	printf("  a page without create --keep fails: %s", msg);
	free(help);
	free(page);
}
END_TEST

/* The function names (sheaf_NAME, not the private sheaf__) declared by the
 * SHEAF_API lines of @text, a header: the first "sheaf_x(" of the line or
 * of the next one (a SHEAF_DEPRECATED line goes before its declaration). */
static void header_functions(const char *text, struct set *out)
{
	const char *l = text;

	out->n = 0;
	while ((l = strstr(l, "\nSHEAF_API ")) != NULL) {
		const char *p = l + 1, *end;

		l = strchr(p, '\n');
		end = l != NULL ? strchr(l + 1, '\n') : NULL;
		for (; p != NULL && *p && (end == NULL || p < end); p++) {
			size_t n;
			char name[NAME_LEN];

			if (strncmp(p, "sheaf_", 6) != 0 || (p > text && (isalnum((unsigned char)p[-1]) ||
								   p[-1] == '_')))
				continue;
			n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
			if (p[n] != '(' || strncmp(p, "sheaf__", 7) == 0 || n >= sizeof(name))
				continue;
			memcpy(name, p, n);
			name[n] = '\0';
			set_add(out, name);
			break;
		}
		if (l == NULL)
			break;
	}
}

/* The functions of the SYNOPSIS of libsheaf(3): each "sheaf_x(". */
static void synopsis_functions(const char *page, struct set *out)
{
	const char *p = strstr(page, "\n.SH SYNOPSIS"), *end;

	out->n = 0;
	REQUIRE(p != NULL, "libsheaf(3) has no SYNOPSIS");
	end = strstr(p + 1, "\n.SH ");
	for (; *p && (end == NULL || p < end); p++) {
		size_t n;
		char name[NAME_LEN];

		if (strncmp(p, "sheaf_", 6) != 0 || isalnum((unsigned char)p[-1]) || p[-1] == '_')
			continue;
		n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
		if (p[n] != '(' || n >= sizeof(name))
			continue;
		memcpy(name, p, n);
		name[n] = '\0';
		set_add(out, name);
	}
}

START_TEST(libsheaf_synopsis)
{
	char path[PATH_MAX], m[4096];
	char *hdr, *page = page_named("libsheaf.3");
	struct set got, want;

	snprintf(path, sizeof(path), "%s/client/sheaf.h", root_dir());
	hdr = read_text(path);
	header_functions(hdr, &want);
	synopsis_functions(page, &got);
	REQUIRE(want.n >= 50, "sheaf.h declares %d functions", want.n);
	m[0] = '\0';
	REQUIRE(set_missing(&want, &got, "in sheaf.h but not in the SYNOPSIS", m, sizeof(m)) +
		set_missing(&got, &want, "in the SYNOPSIS but not in sheaf.h", m, sizeof(m)) == 0,
		"libsheaf(3):%s", m);
	printf("  libsheaf(3): the %d functions of sheaf.h, each in the SYNOPSIS\n", want.n);
	free(hdr);
	free(page);
}
END_TEST

START_TEST(sheafd_options)
{
	char *help = program_out(sheafd_bin(), "--help"), *page = page_named("sheafd.8");
	struct set got, want;
	char m[2048];

	help_options(help, &got);
	page_options(page, "OPTIONS", NULL, &want, NULL);
	REQUIRE(got.n >= 20, "sheafd --help lists %d options", got.n);
	REQUIRE(set_compare(&got, &want, m, sizeof(m)) == 0, "sheafd options:%s", m);
	printf("  sheafd: %d options, the same in --help and sheafd(8)\n", got.n);
	free(help);
	free(page);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manpage");

	require_binaries("test_manpage");
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, global_options, 60);
	ADD_ALONE(s, commands, 60);
	ADD_ALONE(s, command_options, 120);
	ADD_ALONE(s, summary_options, 120);
	ADD_ALONE(s, detects_a_gap, 120);
	ADD_ALONE(s, sheafd_options, 60);
	ADD_ALONE(s, libsheaf_synopsis, 60);
	return run_suite(s);
}
