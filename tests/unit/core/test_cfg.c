/* The settings table: defaults, bounds, sizes, config files, users. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/cfg.h"

#include "check.h"


int main(void)
{
    static struct ol_cfg c;
    char err[256];
    ol_cfg_defaults(&c);
    CHECK(c.max_header_bytes == 16384);
    CHECK(strcmp(c.listen, "127.0.0.1:9000") == 0);
    CHECK(c.health_public == false);
    CHECK(ol_cfg_set(&c, "segment_bytes", "8M", err, sizeof(err)) == 0 &&
          c.segment_bytes == 8 << 20);
    CHECK(ol_cfg_set(&c, "segment-bytes", "1GiB", err, sizeof(err)) == 0 &&
          c.segment_bytes == 1 << 30);
    CHECK(ol_cfg_set(&c, "segment_bytes", "12", err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "out of range") != NULL);
    CHECK(ol_cfg_set(&c, "threads", "two", err, sizeof(err)) == -EINVAL);
    CHECK(ol_cfg_set(&c, "threads", "-1", err, sizeof(err)) == -EINVAL);
    CHECK(ol_cfg_set(&c, "nope", "1", err, sizeof(err)) == -EINVAL);
    CHECK(ol_cfg_set(&c, "metrics_public", "maybe", err, sizeof(err)) == -EINVAL);
    CHECK(ol_cfg_set(&c, "metrics_public", "yes", err, sizeof(err)) == 0 && c.metrics_public);

    char path[] = "/tmp/ol_cfg_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = "# comment\n\nthreads 3   # trailing\nregion eu-west-1\n"
                       "user alice alice-secret-1\nuser bob bob-secret-22\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(ol_cfg_load_file(&c, path, err, sizeof(err)) == 0);
    CHECK(c.threads == 3 && strcmp(c.region, "eu-west-1") == 0);
    CHECK(c.nusers == 2);
    const struct ol_cfg_user *u = ol_cfg_find_user(&c, "bob", 3);
    CHECK(u && strcmp(u->secret_key, "bob-secret-22") == 0);
    CHECK(ol_cfg_find_user(&c, "bo", 2) == NULL);

    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "threads 9999\n";
    CHECK(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    CHECK(ol_cfg_load_file(&c, path, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, ":1:") != NULL);
    unlink(path);
    CHECK(ol_cfg_load_file(&c, "/nonexistent/x.conf", err, sizeof(err)) == -ENOENT);
    printf("test_cfg: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
