/* The openlake command: `openlake server [DIR] [options]`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/admin.h"
#include "cli/bench.h"
#include "cli/native.h"
#include "core/cfg.h"
#include "server/server.h"

#define OL_VERSION "0.1.0"

#define OL_MAX_DIRS 4096

/* Expands the ellipsis form of MinIO ("/data/d{1...6}": d1 .. d6; several
 * braces multiply) into dirs[*n..]; arguments without one are taken as they
 * are.  0, or -1 with a message. */
static int expand_dirs(const char *arg, char **dirs, unsigned *n)
{
    const char *open = strchr(arg, '{');
    const char *dots = open ? strstr(open, "...") : NULL;
    const char *close = dots ? strchr(dots, '}') : NULL;
    if (!close) {
        if (*n >= OL_MAX_DIRS || !(dirs[*n] = strdup(arg)))
            return -1;
        (*n)++;
        return 0;
    }
    char *e1 = NULL, *e2 = NULL;
    long lo = strtol(open + 1, &e1, 10), hi = strtol(dots + 3, &e2, 10);
    if (e1 != dots || e2 != close || lo < 0 || hi < lo || hi - lo >= OL_MAX_DIRS) {
        fprintf(stderr, "openlake: bad range in '%s' (expected {N...M})\n", arg);
        return -1;
    }
    char buf[2048];
    for (long i = lo; i <= hi; i++) {
        int w = snprintf(buf, sizeof(buf), "%.*s%ld%s", (int)(open - arg), arg, i, close + 1);
        if (w < 0 || (size_t)w >= sizeof(buf) || expand_dirs(buf, dirs, n) != 0)
            return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: openlake server [DIR...] [--config FILE] [--SETTING VALUE ...]\n"
            "       openlake bench [--endpoint URL] [--op get|put|...] [options] (--help)\n"
            "       openlake get [-q] ENDPOINT BUCKET KEY FILE|-   (native port, UCX)\n"
            "       openlake put [-q] ENDPOINT FILE|- BUCKET KEY\n"
            "       openlake admin heal|info --endpoint URL [--bucket B [--key K]]\n"
            "       openlake admin user add|rotate ACCESS [--secret S] | remove ACCESS | list\n"
            "                           --endpoint URL\n"
            "       openlake admin cluster pool|show --cluster ENDPOINTS [--cluster_name C] ...\n"
            "       openlake version\n"
            "\n"
            "Runs an S3-compatible object store with its data in DIR (default ./openlake-data).\n"
            "Several DIRs (or /data/d{1...6}) are erasure-coded drives (ec_data, ec_parity).\n"
            "Without configured users it accepts the default key 'openlake' / secret\n"
            "'openlake-secret' and says so at start-up.\n\n");
}

static int server_main(int argc, char **argv)
{
    static struct ol_cfg cfg;
    char err[512];
    ol_cfg_defaults(&cfg);
    /* The config file first, so that flags override it wherever they stand. */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 || strncmp(argv[i], "--config=", 9) == 0) {
            const char *path = argv[i][8] == '=' ? argv[i] + 9 : (i + 1 < argc ? argv[i + 1] : NULL);
            if (!path) {
                fprintf(stderr, "openlake: --config needs a file\n");
                return 2;
            }
            if (ol_cfg_load_file(&cfg, path, err, sizeof(err)) != 0) {
                fprintf(stderr, "openlake: %s\n", err);
                return 2;
            }
        }
    }
    static char *dirs[OL_MAX_DIRS];
    unsigned ndirs = 0;
    const char *ak = NULL, *sk = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            ol_cfg_print_help();
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            if (expand_dirs(a, dirs, &ndirs) != 0)
                return 2;
            continue;
        }
        char name[128];
        const char *value;
        const char *eq = strchr(a + 2, '=');
        if (eq) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a - 2), a + 2);
            value = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a + 2);
            if (i + 1 >= argc) {
                fprintf(stderr, "openlake: --%s needs a value\n", name);
                return 2;
            }
            value = argv[++i];
        }
        if (strcmp(name, "config") == 0)
            continue;
        if (strcmp(name, "access-key") == 0 || strcmp(name, "access_key") == 0) {
            ak = value;
            continue;
        }
        if (strcmp(name, "secret-key") == 0 || strcmp(name, "secret_key") == 0) {
            sk = value;
            continue;
        }
        if (ol_cfg_set(&cfg, name, value, err, sizeof(err)) != 0) {
            fprintf(stderr, "openlake: %s (see openlake server --help)\n", err);
            return 2;
        }
    }
    if ((ak != NULL) != (sk != NULL)) {
        fprintf(stderr, "openlake: --access-key and --secret-key go together\n");
        return 2;
    }
    if (ak && ol_cfg_add_user(&cfg, ak, sk) != 0) {
        fprintf(stderr, "openlake: bad --access-key/--secret-key (3-128 and 8-128 bytes)\n");
        return 2;
    }
    for (unsigned i = 0; i < ndirs; i++) {
        if (strlen(dirs[i]) >= sizeof(cfg.data_dir)) {
            fprintf(stderr, "openlake: data directory path too long\n");
            return 2;
        }
    }
    if (ndirs == 1)
        strcpy(cfg.data_dir, dirs[0]);
    if (ndirs > 1) {
        cfg.drive_dirs = (const char *const *)dirs;
        cfg.ndrive_dirs = ndirs;
    }
    return ol_server_run(&cfg);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "server") == 0)
        return server_main(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "admin") == 0)
        return ol_admin_main(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "get") == 0 || strcmp(argv[1], "put") == 0))
        return ol_native_cli_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "bench") == 0)
        return ol_bench_main(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("openlake %s\n", OL_VERSION);
        return 0;
    }
    usage(argc >= 2 && strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? stderr : stdout);
    return argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : 2;
}
