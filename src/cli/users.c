/* `openlake admin user`: run-time users (users/users.h) through the admin
 * routes /_openlake/admin/users (s3/admin_users.c).
 *
 *   openlake admin user add ACCESS [--secret S] --endpoint URL
 *   openlake admin user rotate ACCESS [--secret S] --endpoint URL
 *   openlake admin user remove ACCESS --endpoint URL
 *   openlake admin user list --endpoint URL
 *
 * add and rotate print the answer, with the secret, on stdout: the only
 * time it is shown.  --secret - reads the secret from stdin (so it stays out
 * of the process list).  Credentials (an admin's) as for `openlake admin`. */
#include "cli/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

static void usage(void)
{
    fprintf(stderr,
            "usage: openlake admin user add ACCESS [--secret S|-] --endpoint http://HOST:PORT\n"
            "       openlake admin user rotate ACCESS [--secret S|-] --endpoint URL\n"
            "       openlake admin user remove ACCESS --endpoint URL\n"
            "       openlake admin user list --endpoint URL\n"
            "         [--access-key AK --secret-key SK] [--region R]   (an admin's)\n"
            "  without --secret a secret is generated; add and rotate print it once.\n");
}


int ol_admin_user_main(int argc, char **argv)
{
    const char *cmd = argc >= 2 ? argv[1] : NULL, *name = NULL, *secret = NULL;
    const char *endpoint = NULL, *region = "us-east-1";
    const char *ak = getenv("OPENLAKE_ACCESS_KEY"), *sk = getenv("OPENLAKE_SECRET_KEY");
    if (!ak || !sk) {
        ak = "openlake";
        sk = "openlake-secret";
    }
    if (!cmd || (strcmp(cmd, "add") && strcmp(cmd, "remove") && strcmp(cmd, "list") &&
                 strcmp(cmd, "rotate"))) {
        usage();
        return 2;
    }
    int i = 2;
    if (strcmp(cmd, "list") != 0) {
        if (argc < 3 || argv[2][0] == '-') {
            usage();
            return 2;
        }
        name = argv[2];
        i = 3;
    }
    for (; i < argc; i += 2) {
        const char *n = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (strcmp(n, "--endpoint") == 0)
            endpoint = v;
        else if (strcmp(n, "--secret") == 0 && strcmp(cmd, "add") * strcmp(cmd, "rotate") == 0)
            secret = v;
        else if (strcmp(n, "--access-key") == 0)
            ak = v;
        else if (strcmp(n, "--secret-key") == 0)
            sk = v;
        else if (strcmp(n, "--region") == 0)
            region = v;
        else {
            usage();
            return 2;
        }
    }
    if (!endpoint) {
        usage();
        return 2;
    }
    char given[256] = "";
    if (secret && strcmp(secret, "-") == 0) {
        if (!fgets(given, sizeof(given), stdin)) {
            fprintf(stderr, "openlake admin user: no secret on stdin\n");
            return 2;
        }
        given[strcspn(given, "\r\n")] = 0;
    } else if (secret) {
        snprintf(given, sizeof(given), "%s", secret);
    }

    struct ol_admin_target t = {.ak = ak, .sk = sk, .region = region};
    const char *hp = strncmp(endpoint, "http://", 7) == 0 ? endpoint + 7 : endpoint;
    size_t hl = strcspn(hp, "/");
    if (hl == 0 || hl >= sizeof(t.host)) {
        fprintf(stderr, "openlake admin user: bad endpoint '%s'\n", endpoint);
        return 2;
    }
    snprintf(t.hostport, sizeof(t.hostport), "%.*s", (int)hl, hp);
    snprintf(t.host, sizeof(t.host), "%s", t.hostport);
    snprintf(t.port, sizeof(t.port), "80");
    char *colon = strrchr(t.host, ':');
    if (colon) {
        snprintf(t.port, sizeof(t.port), "%s", colon + 1);
        *colon = 0;
    }

    char query[512] = "", enc[400];
    if (name) {
        ol_admin_qenc(name, enc, sizeof(enc));
        snprintf(query, sizeof(query), "access_key=%s", enc);
    }
    const char *method = "POST", *path = "/_openlake/admin/users";
    if (strcmp(cmd, "list") == 0)
        method = "GET";
    else if (strcmp(cmd, "remove") == 0)
        method = "DELETE";
    else if (strcmp(cmd, "rotate") == 0)
        path = "/_openlake/admin/users/rotate";
    char *resp = NULL, *body = NULL;
    int status = 0;
    int rc = ol_admin_call(&t, method, path, query, given[0] ? given : NULL, &resp, &body,
                           &status);
    OPENSSL_cleanse(given, sizeof(given));
    if (rc < 0) {
        fprintf(stderr, "openlake admin user: request to %s failed: %s\n", t.hostport,
                strerror(-rc));
        return 1;
    }
    fputs(body, status == 200 ? stdout : stderr);
    if (status != 200)
        fprintf(stderr, "openlake admin user: HTTP %d\n", status);
    if (resp)
        OPENSSL_cleanse(resp, strlen(resp));
    free(resp);
    return status == 200 ? 0 : 1;
}
