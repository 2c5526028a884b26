/* log.c - sheafd's leveled log (log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "log.h"
#include "proto/text.h"

enum log_level log_threshold = LOG_INFO;

static const char *const names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *log_level_name(enum log_level l)
{
	return names[l];
}

void log_msg(enum log_level l, const char *fmt, ...)
{
	char line[1024], shown[TEXT_ESCAPED_MAX(1024)];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (l > log_threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Names (and messages quoting them) are data: escaped, so that no
	 * byte of theirs can end the line or reach a terminal raw. */
	text_escape(shown, sizeof(shown), line);
	fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ sheafd %s: %s\n",
		tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[l], shown);
}
