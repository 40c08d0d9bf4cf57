/* Unit test of zero-copy reads (ol_store_read_file, src/store/segmap.c):
 * what it hands out is the object's bytes, it serves only what the page
 * cache holds, and a bad block is never handed out.  A temporary drive under
 * /tmp, removed at the end.  Exits 0 on success, 1 on failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "store/segment.h"
#include "store/store.h"

#include "check.h"
#include "store_check.h"

static char root[256];

static int put(struct ol_store *st, const char *key, size_t size, uint64_t seed)
{
    struct ol_store_writer *w;
    int rc = check_write_pattern(st, size, seed, 200003, check_fill, &w);
    if (rc)
        return rc;
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "etag-%llu", (unsigned long long)seed);
    info.mtime_ns = 1;
    return ol_store_write_commit_object(w, "bkt", key, strlen(key), &info);
}

/* Reads [off, off+len) of key, zero-copy where it can (checking the handed-out
 * file range with pread) and through ol_store_read where it cannot.  Returns
 * the bytes that came zero-copy, or -1 on a mismatch or error. */
static long long read_back(struct ol_store *st, const char *key, uint64_t seed, uint64_t off,
                           uint64_t len)
{
    struct ol_store_reader *r;
    if (ol_store_read_open(st, "bkt", key, strlen(key), &r) != 0)
        return -1;
    long long zc = 0;
    uint8_t *tmp = malloc(1u << 20);
    uint64_t end = off + len;
    int rounds = 0;
    while (off < end && rounds++ < 100000) {
        int fd;
        uint64_t foff;
        const uint8_t *p = tmp;
        ssize_t n = ol_store_read_file(r, off, (size_t)(end - off), &fd, &foff);
        if (n > 0) {
            if (n > (ssize_t)(1u << 20) || pread(fd, tmp, (size_t)n, (off_t)foff) != n)
                goto bad;
            zc += n;
        } else if (n == -EAGAIN) {
            n = ol_store_read(r, off, (size_t)(end - off), &p);
            if (n <= 0)
                goto bad;
        } else {
            goto bad;
        }
        for (ssize_t i = 0; i < n; i++)
            if (p[i] != check_pattern(seed, off + (uint64_t)i))
                goto bad;
        off += (uint64_t)n;
    }
    free(tmp);
    ol_store_read_close(r);
    return off == end ? zc : -1;
bad:
    free(tmp);
    ol_store_read_close(r);
    return -1;
}

/* Flips one byte of the object's data in its segment file through the page
 * cache (a buffered write), as a stale or damaged cached page would look. */
static int flip(uint64_t seed, uint64_t pos)
{
    uint8_t pat[64];
    for (size_t i = 0; i < sizeof(pat); i++)
        pat[i] = check_pattern(seed, pos + i);
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/seg", root);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int found = -1;
    struct dirent *de;
    while (found < 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char f[700];
        snprintf(f, sizeof(f), "%s/%s", dir, de->d_name);
        int fd = open(f, O_RDWR);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        uint8_t *buf = malloc((size_t)sb.st_size);
        if (pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size)
            for (off_t i = 0; i + (off_t)sizeof(pat) <= sb.st_size; i++)
                if (memcmp(buf + i, pat, sizeof(pat)) == 0) {
                    uint8_t b = buf[i] ^ 0x40;
                    if (pwrite(fd, &b, 1, i) == 1)
                        found = 0;
                    break;
                }
        free(buf);
        close(fd);
    }
    closedir(d);
    return found;
}

/* A page-in that fails (here: a mapping past the end of a truncated file)
 * raises SIGBUS; the check turns it into -EIO and the process goes on. */
static void test_sigbus_guard(void)
{
    char path[320];
    snprintf(path, sizeof(path), "%s/trunc", root);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(ftruncate(fd, 1 << 20) == 0);
    const uint8_t *m = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED) {
        uint32_t crcs[16] = {0};
        uint64_t good = 99;
        /* 64 KiB of zeros: its CRC32C is not 0, so block 0 fails cleanly. */
        CHECK(ol_seg_map_check(m, 65536, 65536, crcs, &good) == -OL_ECORRUPT);
        CHECK(good == 0);
        CHECK(ftruncate(fd, 65536) == 0);
        CHECK(ol_seg_map_check(m + 65536, 131072, 65536, crcs, &good) == -EIO);
        CHECK(good == 0);
        CHECK(ol_seg_map_check(m + 65536, 131072, 65536, crcs, &good) == -EIO);
        munmap((void *)m, 1 << 20);
    }
    close(fd);
    unlink(path);
}

int main(void)
{
    ol_log_level = OL_LOG_ERROR;
    if (check_mkdtemp(root, sizeof(root), "read_file") != 0)
        return 77;
    struct ol_store_opts o;
    ol_store_opts_default(&o);
    o.segment_bytes = 8u << 20;
    o.map_bytes = 1ull << 30;
    struct ol_store *st = check_store_open(root, &o);
    if (!st)
        return 1;
    CHECK_RC(ol_store_bucket_create(st, "bkt", 1), 0);
    test_sigbus_guard();

    /* Written O_DIRECT, so not in the page cache yet: the first read goes
     * (mostly) through ol_store_read, which caches it; the second is all
     * zero-copy. */
    const uint64_t size = (5u << 20) + 12345;
    CHECK_RC(put(st, "big", size, 7), 0);
    long long z1 = read_back(st, "big", 7, 0, size);
    CHECK(z1 >= 0);
    /* As for the segments below: under load (two sanitized tests at once,
     * one of them the router fuzz replay) a cached page can still be in
     * flight or go in between, and a further pass completes it; every pass
     * checks every byte. */
    long long z2 = 0;
    for (int t = 0; t < 3 && z2 != (long long)size; t++)
        z2 = read_back(st, "big", 7, 0, size);
    CHECK(z2 == (long long)size);
    /* Ranges that start and end inside blocks, and the short tail block. */
    CHECK(read_back(st, "big", 7, 100001, 70000) == 70000);
    CHECK(read_back(st, "big", 7, size - 5000, 5000) == 5000);
    CHECK(read_back(st, "big", 7, 65535, 2) == 2);

    /* Segments spanning several files: objects past the first segment. */
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof(k), "seg%d", i);
        CHECK_RC(put(st, k, 3u << 20, 100 + (uint64_t)i), 0);
        CHECK(read_back(st, k, 100 + (uint64_t)i, 0, 3u << 20) >= 0);
        /* The copy-path read above cached the pages, so the whole object
         * now comes zero-copy.  Under load (CI runs two sanitized tests at
         * once) a page can still be in flight or go in between: a second
         * pass must then complete it, and every pass checks every byte. */
        long long zc = 0;
        for (int t = 0; t < 3 && zc != 3 << 20; t++)
            zc = read_back(st, k, 100 + (uint64_t)i, 0, 3u << 20);
        CHECK(zc == 3 << 20);
    }

    /* Inline objects are not in a segment file. */
    CHECK_RC(put(st, "small", 1000, 9), 0);
    struct ol_store_reader *r;
    CHECK_RC(ol_store_read_open(st, "bkt", "small", 5, &r), 0);
    int fd;
    uint64_t foff;
    if (r) {
        CHECK(ol_store_read_file(r, 0, 1000, &fd, &foff) == -EAGAIN);
        CHECK(ol_store_read_file(r, 1000, 10, &fd, &foff) == 0);
        ol_store_read_close(r);
    }

    /* A bad byte in block 2 (offset 150000): blocks 0-1 are handed out,
     * block 2 never is, and ol_store_read reports the corruption. */
    CHECK_RC(put(st, "bad", 400000, 11), 0);
    CHECK(read_back(st, "bad", 11, 0, 400000) >= 0);
    CHECK(read_back(st, "bad", 11, 0, 400000) == 400000);
    CHECK_RC(flip(11, 150000), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "bad", 3, &r), 0);
    if (r) {
        const uint8_t *p;
        CHECK(ol_store_read_file(r, 0, 400000, &fd, &foff) == 131072);
        CHECK(ol_store_read_file(r, 140000, 1000, &fd, &foff) == -EAGAIN);
        CHECK(ol_store_read(r, 140000, 1000, &p) == -OL_ECORRUPT);
        CHECK(ol_store_read_file(r, 200000, 1000, &fd, &foff) == 1000);
        ol_store_read_close(r);
    }

    ol_store_close(st);
    check_rm_rf(root);
    return failures ? 1 : 0;
}
