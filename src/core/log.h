/* Levelled logging to stderr.  The level check happens before any argument is
 * evaluated, so a disabled debug line costs one compare. */
#ifndef OL_CORE_LOG_H
#define OL_CORE_LOG_H

#include <stdbool.h>

enum ol_log_level { OL_LOG_ERROR, OL_LOG_WARN, OL_LOG_INFO, OL_LOG_DEBUG };

extern int ol_log_level;

void ol_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int ol_log_parse_level(const char *name); /* -1 if unknown */

/* Returns true at most `per_sec` times a second per call site: for per-request logs. */
bool ol_log_ratelimit(unsigned *window_sec, unsigned *count, unsigned per_sec);

#define OL_LOG(level, ...)                                                    \
    do {                                                                       \
        if ((level) <= ol_log_level)                                           \
            ol_log_write((level), __FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)
#define ol_error(...) OL_LOG(OL_LOG_ERROR, __VA_ARGS__)
#define ol_warn(...) OL_LOG(OL_LOG_WARN, __VA_ARGS__)
#define ol_info(...) OL_LOG(OL_LOG_INFO, __VA_ARGS__)
#define ol_debug(...) OL_LOG(OL_LOG_DEBUG, __VA_ARGS__)

/* A per-call-site rate-limited log line (at most 10 a second). */
#define ol_log_limited(level, ...)                                             \
    do {                                                                       \
        static __thread unsigned ol__w, ol__c;                                 \
        if ((level) <= ol_log_level && ol_log_ratelimit(&ol__w, &ol__c, 10))   \
            ol_log_write((level), __FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)

/* Assertions stay on in release builds (redis, TigerBeetle): a broken invariant
 * in a storage system must stop the process, not corrupt data. */
#define OL_ASSERT(cond)                                                        \
    do {                                                                       \
        if (__builtin_expect(!(cond), 0))                                      \
            ol_panic(__FILE__, __LINE__, #cond);                               \
    } while (0)
_Noreturn void ol_panic(const char *file, int line, const char *what);

#endif
