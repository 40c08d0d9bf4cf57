/* /_openlake/admin/users...: the HTTP face of the users store
 * (users/users.h), in every mode; the router lets admins only in.
 *
 *   GET    /_openlake/admin/users                       list (no secrets)
 *   POST   /_openlake/admin/users?access_key=AK         add; body: the
 *          secret, or empty for a generated one
 *   POST   /_openlake/admin/users/rotate?access_key=AK  new secret (body
 *          as for add)
 *   DELETE /_openlake/admin/users?access_key=AK         remove
 *
 * The secret travels in the body, never in the URL (URLs end up in logs
 * and shell histories), and is answered once, by add and rotate, with
 * Cache-Control: no-store.  Errors are JSON {"error","message"} with an
 * HTTP status (docs/PROTOCOL.md, "Admin: users"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "s3/s3.h"
#include "users/users.h"

enum { LIST_CAP = 64 + (OL_USERS_MAX + 64) * (OL_USERS_KEY_MAX + 96) };

static int send_json(struct ol_s3_req *r, int status, const char *body, size_t len)
{
    struct ol_http_hdr h[] = {{"Content-Type", "application/json"},
                              {"Cache-Control", "no-store"},
                              {"x-amz-request-id", r->request_id}};
    return ol_http_respond(r->conn, status, h, 3, body, len);
}

static int fail(struct ol_s3_req *r, int rc)
{
    int status = 500;
    const char *code = "InternalError", *msg = ol_strerror(rc);
    switch (rc) {
    case -EINVAL:
        status = 400;
        code = "InvalidArgument";
        msg = "Give access_key (3 to 128 of A-Z a-z 0-9 . _ -) and, if any, a secret of 8 to "
              "128 printable characters without spaces.";
        break;
    case -EEXIST:
        status = 409;
        code = "UserAlreadyExists";
        msg = "A user with this access key exists.";
        break;
    case -ENOENT:
        status = 404;
        code = "NoSuchUser";
        msg = "No run-time user has this access key.";
        break;
    case -EPERM:
        status = 403;
        code = "ConfigUser";
        msg = "A configuration user is changed in the configuration file only.";
        break;
    case -ENOSPC:
        status = 400;
        code = "TooManyUsers";
        msg = "The most run-time users a server keeps are stored already.";
        break;
    case -ENOTSUP:
        status = 501;
        code = "NotImplemented";
        msg = "This server keeps no run-time users.";
        break;
    case -EAGAIN:
    case -ETIMEDOUT:
    case -ECONNREFUSED:
    case -OL_EQUORUM:
        status = 503;
        code = "ServiceUnavailable";
        break;
    default:
        break;
    }
    char b[512];
    int n = snprintf(b, sizeof(b), "{\"error\":\"%s\",\"message\":\"%s\"}\n", code, msg);
    return send_json(r, status, b, (size_t)n);
}

/* The body: a secret, or nothing.  -EINVAL when longer than a secret. */
static int read_secret(struct ol_s3_req *r, char out[OL_USERS_KEY_MAX + 2])
{
    size_t n = 0;
    /* Each round reads some bytes or ends; the buffer bounds the rounds. */
    while (n < OL_USERS_KEY_MAX + 1) {
        ssize_t got = ol_s3_body_read(r, out + n, OL_USERS_KEY_MAX + 1 - n);
        if (got < 0)
            return (int)got;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (n > OL_USERS_KEY_MAX) {
        char sink[256];
        while (ol_s3_body_read(r, sink, sizeof(sink)) > 0)
            ;
        return -EINVAL;
    }
    /* A trailing newline (echo, a file) is no part of the secret. */
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        n--;
    out[n] = 0;
    return 0;
}

struct list_ctx {
    char *b;
    size_t n, cap;
};

static int list_one(void *arg, const struct ol_users_info *i)
{
    struct list_ctx *c = arg;
    /* Access keys are checked names (users.h) or configuration keys: no
     * quotes or backslashes need escaping in either, but be safe. */
    if (strpbrk(i->access_key, "\"\\"))
        return 0;
    int w = snprintf(c->b + c->n, c->cap - c->n,
                     "%s{\"access_key\":\"%s\",\"source\":\"%s\",\"admin\":%s,\"created\":%" PRId64
                     "}",
                     c->n > 10 ? "," : "", i->access_key, i->config ? "config" : "runtime",
                     i->admin ? "true" : "false", i->created_s);
    if (w < 0 || (size_t)w >= c->cap - c->n)
        return 1;
    c->n += (size_t)w;
    return 0;
}

static int list(struct ol_s3_req *r)
{
    struct list_ctx c = {malloc(LIST_CAP), 0, LIST_CAP};
    if (!c.b)
        return fail(r, -ENOMEM);
    c.n = (size_t)snprintf(c.b, c.cap, "{\"users\":[");
    int rc = ol_users_list(r->ctx->users, list_one, &c);
    if (rc < 0) {
        free(c.b);
        return fail(r, rc);
    }
    c.n += (size_t)snprintf(c.b + c.n, c.cap - c.n, "]}\n");
    rc = send_json(r, 200, c.b, c.n);
    free(c.b);
    return rc;
}

static int change(struct ol_s3_req *r, bool rotate)
{
    const struct ol_s3_param *ak = ol_s3_param(r, "access_key");
    if (!ak || !ol_users_key_valid(ak->value))
        return fail(r, -EINVAL);
    char given[OL_USERS_KEY_MAX + 2], secret[OL_USERS_KEY_MAX + 1];
    int rc = read_secret(r, given);
    if (rc == 0)
        rc = rotate ? ol_users_rotate(r->ctx->users, ak->value, given[0] ? given : NULL, secret)
                    : ol_users_add(r->ctx->users, ak->value, given[0] ? given : NULL, secret);
    OPENSSL_cleanse(given, sizeof(given));
    if (rc < 0)
        return fail(r, rc);
    char b[128 + 2 * OL_USERS_KEY_MAX];
    int n = snprintf(b, sizeof(b), "{\"access_key\":\"%s\",\"secret_key\":\"", ak->value);
    /* The secret is printable ASCII without spaces; '"' and '\\' escaped. */
    for (const char *s = secret; *s && (size_t)n + 4 < sizeof(b); s++) {
        if (*s == '"' || *s == '\\')
            b[n++] = '\\';
        b[n++] = *s;
    }
    n += snprintf(b + n, sizeof(b) - (size_t)n, "\"}\n");
    rc = send_json(r, 200, b, (size_t)n);
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

static int remove_user(struct ol_s3_req *r)
{
    const struct ol_s3_param *ak = ol_s3_param(r, "access_key");
    if (!ak || !ol_users_key_valid(ak->value))
        return fail(r, -EINVAL);
    int rc = ol_users_remove(r->ctx->users, ak->value);
    if (rc < 0)
        return fail(r, rc);
    char b[256];
    int n = snprintf(b, sizeof(b), "{\"access_key\":\"%s\",\"removed\":true}\n", ak->value);
    return send_json(r, 200, b, (size_t)n);
}

int ol_s3_admin_users(struct ol_s3_req *r)
{
    struct ol_slice p = r->http->head.path;
    struct ol_slice m = r->http->head.method;
#define IS(s, lit) (s.n == sizeof(lit) - 1 && memcmp(s.p, lit, s.n) == 0)
    if (IS(p, "/_openlake/admin/users")) {
        if (IS(m, "GET"))
            return list(r);
        if (IS(m, "POST"))
            return change(r, false);
        if (IS(m, "DELETE"))
            return remove_user(r);
    }
    if (IS(p, "/_openlake/admin/users/rotate") && IS(m, "POST"))
        return change(r, true);
#undef IS
    return ol_s3_error(r, OL_S3_InvalidRequest, "Unknown administrative path or method.");
}
