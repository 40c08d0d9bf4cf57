#include "cluster/key.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/hex.h"
#include "core/sha256.h"

enum { KEY_FILE_MAX = 4096, KEY_FILE_MIN = 16 };

int ol_key_file_read(const char *path, const char *what, size_t min,
                     uint8_t key[OL_CLUSTER_KEY_BYTES], char *why, size_t whylen)
{
    uint8_t buf[KEY_FILE_MAX + 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "%s %s: %s", what, path, strerror(e));
        return -e;
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            snprintf(why, whylen, "%s %s: %s", what, path, strerror(e));
            return -e;
        }
        if (r == 0 || (n += (size_t)r) == sizeof(buf))
            break;
    }
    close(fd);
    size_t a = 0, b = n;
    while (a < b && isspace(buf[a]))
        a++;
    while (b > a && isspace(buf[b - 1]))
        b--;
    int rc = 0;
    if (n > KEY_FILE_MAX || b - a < min) {
        snprintf(why, whylen, "%s %s: give %zu to %d bytes of secret", what, path, min,
                 KEY_FILE_MAX);
        rc = -EINVAL;
    } else {
        rc = ol_sha256(buf + a, b - a, key);
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

int ol_cluster_key(struct ol_etcd *etcd, const char *cluster, const char *key_file,
                   uint8_t key[OL_CLUSTER_KEY_BYTES], char *why, size_t whylen)
{
    why[0] = '\0';
    if (key_file && key_file[0])
        return ol_key_file_read(key_file, "cluster_key_file", KEY_FILE_MIN, key, why, whylen);
    char name[160];
    snprintf(name, sizeof(name), OL_KEY_KEY_FMT, cluster);
    /* Two rounds at most: read; absent, create (or lose the race to a node
     * that did) and read again. */
    for (int round = 0; round < 2; round++) {
        struct ol_etcd_kv kv = {0};
        int rc = ol_etcd_get(etcd, name, &kv, NULL);
        if (rc == 0) {
            rc = ol_unhex(kv.value, kv.value_len, key, OL_CLUSTER_KEY_BYTES) ? 0 : -EINVAL;
            if (kv.value)
                OPENSSL_cleanse(kv.value, kv.value_len);
            ol_etcd_kv_clear(&kv);
            if (rc < 0)
                snprintf(why, whylen, "etcd key %s is not 64 hex digits", name);
            return rc;
        }
        if (rc != -ENOENT) {
            snprintf(why, whylen, "reading %s from etcd: %s", name, ol_strerror(rc));
            return rc;
        }
        uint8_t fresh[OL_CLUSTER_KEY_BYTES];
        char hex[2 * OL_CLUSTER_KEY_BYTES + 1];
        if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh)) {
            snprintf(why, whylen, "getrandom: %s", strerror(errno));
            return -EIO;
        }
        for (size_t i = 0; i < sizeof(fresh); i++)
            snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
        rc = ol_etcd_cas(etcd, name, OL_ETCD_IF_ABSENT, 0, hex, 2 * sizeof(fresh), 0, NULL);
        OPENSSL_cleanse(hex, sizeof(hex));
        if (rc == 0) {
            memcpy(key, fresh, sizeof(fresh));
            OPENSSL_cleanse(fresh, sizeof(fresh));
            return 0;
        }
        OPENSSL_cleanse(fresh, sizeof(fresh));
        if (rc != -OL_ECASFAIL) {
            snprintf(why, whylen, "creating %s in etcd: %s", name, ol_strerror(rc));
            return rc;
        }
    }
    snprintf(why, whylen, "%s: created and gone again", name);
    return -EAGAIN;
}
