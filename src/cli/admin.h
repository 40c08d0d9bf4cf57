/* `openlake admin heal|info --endpoint URL`: the administrative client of an
 * erasure-coded deployment (s3/ec_object.h's /_openlake/admin/ routes). */
#ifndef OL_CLI_ADMIN_H
#define OL_CLI_ADMIN_H

#include <stddef.h>

/* argv[0] is "admin".  Returns the process exit code. */
int ol_admin_main(int argc, char **argv);

/* `openlake admin user ...` (cli/users.c); argv[0] is "user". */
int ol_admin_user_main(int argc, char **argv);

/* Where and as whom admin requests go. */
struct ol_admin_target {
    char host[256], port[16], hostport[256];
    const char *ak, *sk, *region;
};
/* Signs (SigV4, unsigned payload) and sends one request with req_body
 * (NULL: none); *resp (malloc'ed, NUL-terminated) is the whole answer and
 * *body points into it.  0 or -errno; *status is the HTTP status. */
/* Percent-encodes everything but A-Z a-z 0-9 - _ . ~ (SigV4's canonical
 * query form), NUL-terminated, truncated to cap. */
void ol_admin_qenc(const char *s, char *out, size_t cap);

int ol_admin_call(const struct ol_admin_target *t, const char *method, const char *path,
                  const char *query, const char *req_body, char **resp, char **body,
                  int *status);

#endif
