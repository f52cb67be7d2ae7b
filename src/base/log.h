/* src/base/log.h: leveled messages to stderr.
 *
 *   adapt_log(ADAPT_LOG_INFO, "loaded %d images from %s", n, path);
 *
 * The level threshold is global (adapt_log_set_level) and defaults to INFO;
 * ADAPT_LOG_LEVEL=debug|info|warn|error in the environment overrides it.
 */
#ifndef ADAPT_BASE_LOG_H
#define ADAPT_BASE_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum adapt_log_level { ADAPT_LOG_DEBUG = 0, ADAPT_LOG_INFO, ADAPT_LOG_WARN, ADAPT_LOG_ERROR };

void adapt_log_set_level(enum adapt_log_level lvl);
enum adapt_log_level adapt_log_get_level(void);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void adapt_log(enum adapt_log_level lvl, const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
