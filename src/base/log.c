/* src/base/log.c */
#include "src/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1;

static int level_from_env(void)
{
    const char *e = getenv("ADAPT_LOG_LEVEL");
    if (!e) return ADAPT_LOG_INFO;
    if (!strcmp(e, "debug")) return ADAPT_LOG_DEBUG;
    if (!strcmp(e, "warn")) return ADAPT_LOG_WARN;
    if (!strcmp(e, "error")) return ADAPT_LOG_ERROR;
    return ADAPT_LOG_INFO;
}

void adapt_log_set_level(enum adapt_log_level lvl) { log_level = (int)lvl; }

enum adapt_log_level adapt_log_get_level(void)
{
    if (log_level < 0) log_level = level_from_env();
    return (enum adapt_log_level)log_level;
}

void adapt_log(enum adapt_log_level lvl, const char *fmt, ...)
{
    static const char *tag[] = {"debug", "info", "warning", "error"};
    if ((int)lvl < (int)adapt_log_get_level()) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", tag[lvl]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
