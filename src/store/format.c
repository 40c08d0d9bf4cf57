/* The drive format file. */
#include "store/format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

#define OL_FORMAT_TMP "FORMAT.tmp"

int ol_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    size_t got = 0;
    for (int tries = 0; got < len && tries < 100; tries++) {
        ssize_t n = getrandom(p + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    return got == len ? 0 : -EIO;
}

static uint32_t format_crc(const struct ol_format *f)
{
    struct ol_format z = *f;
    z.crc = 0;
    return ol_crc32c(&z, sizeof(z));
}

int ol_format_read(int dir_fd, struct ol_format *out)
{
    int fd = openat(dir_fd, OL_FORMAT_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    ssize_t n = pread(fd, out, sizeof(*out), 0);
    if (n < 0) {
        rc = -errno;
        goto out;
    }
    if ((size_t)n != sizeof(*out) || out->magic != OL_FORMAT_MAGIC ||
        out->hdr_bytes != sizeof(*out) || format_crc(out) != out->crc) {
        rc = -OL_EFORMAT;
        goto out;
    }
    /* Older layouts are upgraded by the caller; a newer one is refused with
     * a message that says why, never guessed at. */
    if (out->version < OL_FORMAT_VERSION_MIN || out->version > OL_FORMAT_VERSION) {
        ol_error("drive format version %u is not supported by this build (%u..%u)",
                 (unsigned)out->version, (unsigned)OL_FORMAT_VERSION_MIN,
                 (unsigned)OL_FORMAT_VERSION);
        rc = -OL_EFORMAT;
        goto out;
    }
    /* The EC membership fields must make sense together; an inconsistent
     * record is damage (the CRC passed, so a bug wrote it), not a guess. */
    if (out->ec_joined > 1 ||
        (out->ec_joined &&
         (out->ec_ndrives == 0 || out->ec_index >= out->ec_ndrives || out->ec_k == 0))) {
        ol_error("drive format has inconsistent EC membership fields (joined %u, drive %u "
                 "of %u, %u+%u)",
                 (unsigned)out->ec_joined, (unsigned)out->ec_index, (unsigned)out->ec_ndrives,
                 (unsigned)out->ec_k, (unsigned)out->ec_m);
        rc = -OL_EFORMAT;
        goto out;
    }
out:
    close(fd);
    return rc;
}

int ol_format_create(int dir_fd, struct ol_format *out)
{
    struct ol_format f;
    memset(&f, 0, sizeof(f));
    f.magic = OL_FORMAT_MAGIC;
    f.version = OL_FORMAT_VERSION;
    f.hdr_bytes = sizeof(f);
    int rc = ol_random(f.deployment_id, sizeof(f.deployment_id));
    if (rc == 0)
        rc = ol_random(f.drive_id, sizeof(f.drive_id));
    if (rc)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    f.created_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    rc = ol_format_write(dir_fd, &f);
    if (rc == 0)
        *out = f;
    return rc;
}

int ol_format_write(int dir_fd, const struct ol_format *in)
{
    struct ol_format f = *in;
    f.crc = format_crc(&f);
    int rc = 0;
    int fd = openat(dir_fd, OL_FORMAT_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t n = pwrite(fd, &f, sizeof(f), 0);
    if (n < 0)
        rc = -errno;
    else if ((size_t)n != sizeof(f))
        rc = -EIO;
    else if (fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc)
        goto out;
    /* The rename publishes a complete, durable file; the directory fsync makes
     * the rename itself durable. */
    if (renameat(dir_fd, OL_FORMAT_TMP, dir_fd, OL_FORMAT_NAME) < 0) {
        rc = -errno;
        goto out;
    }
    if (fsync(dir_fd) < 0) {
        rc = -errno;
        goto out;
    }
out:
    if (rc)
        unlinkat(dir_fd, OL_FORMAT_TMP, 0);
    return rc;
}
