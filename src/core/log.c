#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ol_log_level = OL_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void ol_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    /* One fprintf per line so that lines from different threads do not interleave. */
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s:%d %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
            level_names[level], base ? base + 1 : file, line, msg);
}

int ol_log_parse_level(const char *name)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

bool ol_log_ratelimit(unsigned *window_sec, unsigned *count, unsigned per_sec)
{
    unsigned now = (unsigned)time(NULL);
    if (now != *window_sec) {
        *window_sec = now;
        *count = 0;
    }
    return (*count)++ < per_sec;
}

void ol_panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "PANIC %s:%d: assertion failed: %s\n", file, line, what);
    fflush(stderr);
    abort();
}
