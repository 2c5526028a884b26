/*
 * log.h - sheafd's log: one line per event on stderr (journald adds the
 * time under systemd), with a level filter set by --log-level or SIGHUP.
 * Every message is written in proto/text.h's escaped form (names are
 * data: no byte of one can end the line or reach a terminal raw).
 * Who may call: any part of daemon/.
 */
#ifndef SHEAF_DAEMON_LOG_H
#define SHEAF_DAEMON_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern enum log_level log_threshold;

/* Parse "error|warn|info|debug"; -1 when unknown. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level l);

void log_msg(enum log_level l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
