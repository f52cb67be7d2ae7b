/* src/base/status.c: thread-local last-error record. */
#include "src/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_msg[1024];
static _Thread_local char err_where[256];

const char *adapt_status_name(enum adapt_status st)
{
    switch (st) {
    case ADAPT_OK: return "ok";
    case ADAPT_EINVAL: return "invalid value";
    case ADAPT_ENOMEM: return "out of memory";
    case ADAPT_EIO: return "input/output error";
    case ADAPT_EFORMAT: return "malformed file";
    case ADAPT_ERANGE: return "out of range";
    case ADAPT_ENOENT: return "not found";
    case ADAPT_EEXIST: return "already exists";
    case ADAPT_EUNSUPPORTED: return "unsupported";
    case ADAPT_EINTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

enum adapt_status adapt_error_at(const char *file, int line, enum adapt_status st,
                                 const char *fmt, ...)
{
    /* Formatted aside first: an argument may be adapt_error_message() itself. */
    char msg[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(err_msg, msg, sizeof err_msg);
    snprintf(err_where, sizeof err_where, "%s:%d", file, line);
    if (getenv("ADAPT_DEBUG"))
        fprintf(stderr, "[adapt debug] %s: %s (%s)\n", err_where, err_msg, adapt_status_name(st));
    return st;
}

const char *adapt_error_message(void) { return err_msg; }
const char *adapt_error_where(void) { return err_where; }

void adapt_error_clear(void)
{
    err_msg[0] = '\0';
    err_where[0] = '\0';
}

void adapt_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "adapt-sim: internal error: assertion '%s' failed at %s:%d\n", expr, file,
            line);
    abort();
}
