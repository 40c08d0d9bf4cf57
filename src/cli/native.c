#include "cli/native.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "openlake/client.h"

enum { CHUNK = 64 << 20 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct progress {
    bool on;
    double t0, last;
    uint64_t total;
};

static void progress(struct progress *p, uint64_t done, bool end)
{
    if (!p->on)
        return;
    double t = now_s();
    if (!end && t - p->last < 0.1)
        return;
    p->last = t;
    double pct = p->total ? 100.0 * (double)done / (double)p->total : 100.0;
    int bars = (int)(pct / 4);
    double rate = t > p->t0 ? (double)done / (t - p->t0) / 1e6 : 0;
    fprintf(stderr, "\r[%-25.*s] %5.1f%% %" PRIu64 "/%" PRIu64 " bytes %.1f MB/s", bars,
            "#########################", pct, done, p->total, rate);
    if (end)
        fputc('\n', stderr);
}

static const char *cred(const char *a, const char *b, const char *c, const char *dflt)
{
    const char *v = a ? a : getenv(b);
    if (!v)
        v = getenv(c);
    return v ? v : dflt;
}

static int usage(void)
{
    fprintf(stderr, "usage: openlake get [-q] ENDPOINT BUCKET KEY FILE|-\n"
                    "       openlake put [-q] ENDPOINT FILE|- BUCKET KEY\n"
                    "  [--access_key K] [--secret_key S]  (or OPENLAKE_ACCESS_KEY / "
                    "OPENLAKE_SECRET_KEY, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)\n");
    return 2;
}

static int fail(const char *what, int rc)
{
    if (rc == -EACCES)
        fprintf(stderr, "openlake: %s: access denied (an unknown access key, a wrong secret "
                        "key, or a clock more than 15 minutes off the server's)\n", what);
    else
        fprintf(stderr, "openlake: %s: %s\n", what, ol_client_strerror(rc));
    return 1;
}

static int do_get(struct ol_client *c, const char *bucket, const char *key, const char *path,
                  bool quiet)
{
    struct ol_client_info info;
    int rc = ol_client_head(c, bucket, key, &info);
    if (rc < 0)
        return fail("head", rc);
    bool to_stdout = strcmp(path, "-") == 0;
    char tmp[4096];
    int fd = 1;
    if (!to_stdout) {
        snprintf(tmp, sizeof(tmp), "%s.part", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            fprintf(stderr, "openlake: %s: %s\n", tmp, strerror(errno));
            return 1;
        }
    }
    uint64_t cap = info.size < CHUNK ? (info.size ? info.size : 1) : CHUNK;
    uint8_t *buf = malloc(cap);
    struct progress p = {.on = !quiet && isatty(2), .t0 = now_s(), .total = info.size};
    uint64_t done = 0;
    rc = buf ? 0 : -ENOMEM;
    while (rc == 0 && done < info.size) {
        struct ol_client_info ci;
        int64_t n = ol_client_get(c, bucket, key, done, buf, cap, &ci);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (strcmp(ci.etag, info.etag) != 0) {
            fprintf(stderr, "\nopenlake: %s/%s changed during the download\n", bucket, key);
            rc = -EAGAIN;
            break;
        }
        for (int64_t w = 0; w < n;) {
            ssize_t k = write(fd, buf + w, (size_t)(n - w));
            if (k < 0) {
                rc = -errno;
                break;
            }
            w += k;
        }
        done += (uint64_t)n;
        progress(&p, done, false);
    }
    free(buf);
    progress(&p, done, true);
    if (!to_stdout) {
        if (rc == 0 && (fsync(fd) != 0 || close(fd) != 0))
            rc = -errno;
        else if (rc != 0)
            close(fd);
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -errno;
        if (rc != 0)
            unlink(tmp);
    }
    if (rc == -EAGAIN)
        return 1;
    return rc < 0 ? fail("get", rc) : 0;
}

static int do_put(struct ol_client *c, const char *path, const char *bucket, const char *key,
                  bool quiet)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "openlake: %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        /* A pipe: read it whole first (its size is not known up front). */
        size_t cap = 1 << 20, len = 0;
        uint8_t *b = malloc(cap);
        ssize_t k;
        while (b && (k = read(fd, b + len, cap - len)) > 0) {
            len += (size_t)k;
            if (len == cap) {
                uint8_t *nb = realloc(b, cap *= 2);
                if (!nb) {
                    free(b);
                    b = NULL;
                }
                b = nb;
            }
        }
        if (!b)
            return fail("put", -ENOMEM);
        struct ol_client_info info;
        int rc = ol_client_put(c, bucket, key, b, len, &info);
        free(b);
        if (rc < 0)
            return fail("put", rc);
        if (!quiet)
            fprintf(stderr, "%s/%s: %zu bytes, ETag %s\n", bucket, key, len, info.etag);
        return 0;
    }
    uint64_t total = (uint64_t)st.st_size;
    struct ol_client_put_stream *s;
    int rc = ol_client_put_begin(c, bucket, key, total, &s);
    if (rc < 0) {
        close(fd);
        return fail("put", rc);
    }
    uint8_t *buf = malloc(CHUNK);
    struct progress p = {.on = !quiet && isatty(2), .t0 = now_s(), .total = total};
    uint64_t done = 0;
    while (buf && rc == 0 && done < total) {
        ssize_t k = read(fd, buf, CHUNK);
        if (k <= 0) {
            rc = k < 0 ? -errno : -EIO; /* the file shrank */
            break;
        }
        rc = ol_client_put_write(s, buf, (uint64_t)k);
        done += (uint64_t)k;
        progress(&p, done, false);
    }
    free(buf);
    close(fd);
    if (!buf)
        rc = -ENOMEM;
    if (rc < 0) {
        ol_client_put_abort(s);
        progress(&p, done, true);
        return fail("put", rc);
    }
    struct ol_client_info info;
    rc = ol_client_put_commit(s, &info);
    progress(&p, done, true);
    if (rc < 0)
        return fail("put", rc);
    if (!quiet)
        fprintf(stderr, "%s/%s: %" PRIu64 " bytes, ETag %s\n", bucket, key, total, info.etag);
    return 0;
}

int ol_native_cli_main(int argc, char **argv)
{
    bool get = strcmp(argv[0], "get") == 0, quiet = false;
    const char *ak = NULL, *sk = NULL, *pos[5];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else if (strcmp(argv[i], "--access_key") == 0 && i + 1 < argc)
            ak = argv[++i];
        else if (strcmp(argv[i], "--secret_key") == 0 && i + 1 < argc)
            sk = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            return usage();
        else if (np < 5)
            pos[np++] = argv[i];
        else
            return usage();
    }
    if (np != 4)
        return usage();
    struct ol_client_opts o = {
        .endpoint = pos[0],
        .access_key = cred(ak, "OPENLAKE_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "openlake"),
        .secret_key = cred(sk, "OPENLAKE_SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "openlake-secret"),
    };
    struct ol_client *c;
    int rc = ol_client_open(&o, &c);
    if (rc < 0)
        return fail(pos[0], rc);
    rc = get ? do_get(c, pos[1], pos[2], pos[3], quiet) : do_put(c, pos[1], pos[2], pos[3], quiet);
    ol_client_close(c);
    return rc;
}
