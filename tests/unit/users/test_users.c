/* users/: syntax checks, sealing (a wrong key or name does not open), the
 * lookup of configuration and run-time users, admins, and the one-drive
 * store: add, rotate, remove, list, and a reopen that finds them again
 * with the secrets sealed on the drive. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/cfg.h"
#include "obj/obj.h"
#include "store/store.h"
#include "users/users.h"

static char root[256];

static void test_syntax_and_seal(void)
{
    CHECK(ol_users_key_valid("alice"));
    CHECK(ol_users_key_valid("A.b_c-9"));
    CHECK(!ol_users_key_valid("ab"));
    CHECK(!ol_users_key_valid("a/b"));
    CHECK(!ol_users_key_valid("a b"));
    CHECK(!ol_users_key_valid(NULL));
    CHECK(ol_users_secret_valid("12345678"));
    CHECK(!ol_users_secret_valid("1234567"));
    CHECK(!ol_users_secret_valid("1234 5678"));

    uint8_t k1[32] = {1}, k2[32] = {2};
    char sealed[OL_USERS_SEALED_MAX], again[OL_USERS_SEALED_MAX], out[OL_USERS_KEY_MAX + 1];
    CHECK_RC(ol_users_seal(k1, "alice", "s3cret-value", sealed), 0);
    CHECK(strstr(sealed, "s3cret") == NULL);
    CHECK_RC(ol_users_unseal(k1, "alice", sealed, strlen(sealed), out), 0);
    CHECK(strcmp(out, "s3cret-value") == 0);
    /* A fresh nonce each time. */
    CHECK_RC(ol_users_seal(k1, "alice", "s3cret-value", again), 0);
    CHECK(strcmp(sealed, again) != 0);
    CHECK_RC(ol_users_unseal(k2, "alice", sealed, strlen(sealed), out), -EBADMSG);
    CHECK_RC(ol_users_unseal(k1, "bob", sealed, strlen(sealed), out), -EBADMSG);
    sealed[30] = sealed[30] == 'a' ? 'b' : 'a';
    CHECK_RC(ol_users_unseal(k1, "alice", sealed, strlen(sealed), out), -EBADMSG);
    CHECK_RC(ol_users_unseal(k1, "alice", "zz", 2, out), -EBADMSG);
}

static void test_static(void)
{
    struct ol_cfg cfg;
    ol_cfg_defaults(&cfg);
    CHECK_RC(ol_cfg_add_user(&cfg, "root", "root-secret"), 0);
    CHECK_RC(ol_cfg_add_user(&cfg, "other", "other-secret"), 0);
    struct ol_users *u;
    CHECK_RC(ol_users_open_static(&cfg, &u), 0);
    char s[OL_USERS_KEY_MAX + 1];
    bool admin = false;
    CHECK_RC(ol_users_lookup(u, "rootX", 4, s, &admin), 0); /* a slice, not a string */
    CHECK(strcmp(s, "root-secret") == 0 && admin);
    CHECK_RC(ol_users_lookup(u, "other", 5, s, &admin), 0);
    CHECK(!admin); /* no admin_users: the first configuration user only */
    CHECK_RC(ol_users_lookup(u, "nobody", 6, s, &admin), -ENOENT);
    CHECK_RC(ol_users_add(u, "newbie", NULL, s), -ENOTSUP);
    snprintf(cfg.admin_users, sizeof(cfg.admin_users), "other");
    CHECK(ol_users_is_admin(u, "other") && !ol_users_is_admin(u, "root"));
    ol_users_close(u);
}

struct seen {
    int config, runtime;
    char last[OL_USERS_KEY_MAX + 1];
};

static int count(void *ctx, const struct ol_users_info *i)
{
    struct seen *s = ctx;
    if (i->config)
        s->config++;
    else
        s->runtime++;
    snprintf(s->last, sizeof(s->last), "%s", i->access_key);
    return 0;
}

static void test_obj(void)
{
    struct ol_cfg cfg;
    ol_cfg_defaults(&cfg);
    CHECK_RC(ol_cfg_add_user(&cfg, "root", "root-secret"), 0);
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/d", root);
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    struct ol_store *st;
    struct ol_obj *o;
    CHECK_RC(ol_store_open(&st, dir, &so), 0);
    CHECK_RC(ol_obj_open_store(st, &o), 0);
    struct ol_users *u;
    char err[256] = "", s[OL_USERS_KEY_MAX + 1], gen[OL_USERS_KEY_MAX + 1];
    CHECK_RC(ol_users_open_obj(&cfg, o, &u, err, sizeof(err)), 0);
    CHECK_RC(ol_users_add(u, "alice", NULL, gen), 0);
    CHECK(strlen(gen) == OL_USERS_GEN_SECRET);
    CHECK_RC(ol_users_lookup(u, "alice", 5, s, NULL), 0);
    CHECK(strcmp(s, gen) == 0);
    CHECK_RC(ol_users_add(u, "alice", "another-one", s), -EEXIST);
    CHECK_RC(ol_users_add(u, "root", "another-one", s), -EEXIST);
    CHECK_RC(ol_users_add(u, "bad/key", NULL, s), -EINVAL);
    CHECK_RC(ol_users_add(u, "bob", "short", s), -EINVAL);
    CHECK_RC(ol_users_add(u, "bob", "bob-secret-1", NULL), 0);
    CHECK_RC(ol_users_rotate(u, "bob", "bob-secret-2", s), 0);
    CHECK_RC(ol_users_lookup(u, "bob", 3, s, NULL), 0);
    CHECK(strcmp(s, "bob-secret-2") == 0);
    CHECK_RC(ol_users_rotate(u, "nobody", NULL, s), -ENOENT);
    CHECK_RC(ol_users_remove(u, "root"), -EPERM);
    CHECK_RC(ol_users_rotate(u, "root", NULL, s), -EPERM);
    CHECK_RC(ol_users_add(u, "carol", "carol-secret", NULL), 0);
    CHECK_RC(ol_users_remove(u, "carol"), 0);
    CHECK_RC(ol_users_remove(u, "carol"), -ENOENT);
    CHECK_RC(ol_users_lookup(u, "carol", 5, s, NULL), -ENOENT);
    struct seen seen = {0};
    CHECK_RC(ol_users_list(u, count, &seen), 0);
    CHECK(seen.config == 1 && seen.runtime == 2 && strcmp(seen.last, "bob") == 0);
    ol_users_close(u);

    /* Reopened: the same users, from the drive. */
    CHECK_RC(ol_users_open_obj(&cfg, o, &u, err, sizeof(err)), 0);
    CHECK(ol_users_count(u) == 2);
    CHECK_RC(ol_users_lookup(u, "alice", 5, s, NULL), 0);
    CHECK(strcmp(s, gen) == 0);
    CHECK_RC(ol_users_lookup(u, "carol", 5, s, NULL), -ENOENT);
    /* The stored document holds the names, not the secrets. */
    char doc[8192];
    ssize_t n = ol_obj_bucket_config_get(o, OL_USERS_BUCKET, OL_USERS_SETTING, doc,
                                         sizeof(doc) - 1);
    CHECK(n > 0);
    doc[n > 0 ? n : 0] = 0;
    CHECK(strstr(doc, "alice") && strstr(doc, "bob") && !strstr(doc, "carol"));
    CHECK(!strstr(doc, gen) && !strstr(doc, "bob-secret"));
    ol_users_close(u);

    /* A configuration user of the same name hides a stored one. */
    CHECK_RC(ol_cfg_add_user(&cfg, "alice", "alice-from-file"), 0);
    CHECK_RC(ol_users_open_obj(&cfg, o, &u, err, sizeof(err)), 0);
    CHECK_RC(ol_users_lookup(u, "alice", 5, s, NULL), 0);
    CHECK(strcmp(s, "alice-from-file") == 0);
    CHECK(ol_users_count(u) == 1);
    ol_users_close(u);
    ol_obj_close(o);
    ol_store_close(st);
}

int main(void)
{
    if (check_mkdtemp(root, sizeof(root), "users") < 0)
        return 77;
    test_syntax_and_seal();
    test_static();
    test_obj();
    check_rm_rf(root);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
