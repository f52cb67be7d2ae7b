/* src/base/status.h: status codes and error reporting for every adapt-sim library.
 *
 * Library functions return enum adapt_status. The function where an error
 * starts calls ADAPT_ERROR once, which records a human-readable message (and
 * the source location) in thread-local storage and returns the status; callers
 * propagate the status without re-reporting. Program entry points print
 * adapt_error_message() and exit non-zero. Bugs (violated invariants) use
 * ADAPT_ASSERT, which aborts.
 *
 *   if (fd < 0) return ADAPT_ERROR(ADAPT_EIO, "%s: cannot open: %s", path, strerror(errno));
 *   ...
 *   if ((st = adapt_thing_load(path)) != ADAPT_OK) {
 *       fprintf(stderr, "adapt-train: %s\n", adapt_error_message());
 *       return 1;
 *   }
 *
 * Non-goals: no error stacks, no callbacks. libc and libm only.
 */
#ifndef ADAPT_BASE_STATUS_H
#define ADAPT_BASE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum adapt_status {
    ADAPT_OK = 0,
    ADAPT_EINVAL,      /* invalid argument or configuration value */
    ADAPT_ENOMEM,      /* allocation failed */
    ADAPT_EIO,         /* file could not be opened, read or written */
    ADAPT_EFORMAT,     /* file content malformed (bad magic, truncated, bad JSON) */
    ADAPT_ERANGE,      /* value out of range */
    ADAPT_ENOENT,      /* file or named entity not found */
    ADAPT_EEXIST,      /* output already exists */
    ADAPT_EUNSUPPORTED, /* feature not available in this build or on this machine */
    ADAPT_EINTERRUPTED  /* stopped on request (SIGINT) */
};

const char *adapt_status_name(enum adapt_status st);

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
enum adapt_status adapt_error_at(const char *file, int line, enum adapt_status st,
                                 const char *fmt, ...);

/* Record an error where it starts; evaluates to the status. The arguments may
 * include adapt_error_message() (a message wrapping the previous one). */
#define ADAPT_ERROR(st, ...) adapt_error_at(__FILE__, __LINE__, (st), __VA_ARGS__)

/* The last recorded message of this thread ("" when none). */
const char *adapt_error_message(void);
/* Source location of the last recorded error ("file:line"). */
const char *adapt_error_where(void);
void adapt_error_clear(void);

void adapt_assert_fail(const char *expr, const char *file, int line);
#define ADAPT_ASSERT(e) ((e) ? (void)0 : adapt_assert_fail(#e, __FILE__, __LINE__))

#ifdef __cplusplus
}
#endif
#endif
