/* libFuzzer target for src/access/policy.c.
 *
 * The input is a policy document for bucket "bkt".  When the parser
 * accepts it, the policy is evaluated for a set of requests (users,
 * anonymous, object and bucket actions, source addresses, prefixes) and
 * the answers must keep the evaluator's contract: the same request gives
 * the same answer twice, and whatever is allowed for some key could be
 * allowed (ol_policy_may_allow, DeleteObjects' pre-check).  A rejected
 * input must leave no policy and a reason.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/policy.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_policy: %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const users[] = {NULL, "bob", "alice", "*"};
    static const char *const actions[] = {"s3:GetObject", "s3:ListBucket", "s3:PutObject",
                                          "s3:DeleteObject", "s3:GetBucketAcl"};
    static const char *const keys[] = {NULL, "a", "pub/x", "secret/y", ""};
    static const char *const ips[] = {NULL, "127.0.0.1", "10.1.2.3", "2001:db8::1", "junk"};
    static const char *const prefixes[] = {NULL, "", "pub/"};
    struct ol_policy *p = NULL;
    char err[200];
    int rc = ol_policy_parse((const char *)data, size, "bkt", &p, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG || rc == -ENOMEM);
    if (rc != 0) {
        FUZZ_CHECK(p == NULL);
        FUZZ_CHECK(rc != -EINVAL || err[0]);
        return 0;
    }
    FUZZ_CHECK(p != NULL && ol_policy_bytes(p) > 0);
    for (size_t u = 0; u < sizeof(users) / sizeof(*users); u++)
        for (size_t a = 0; a < sizeof(actions) / sizeof(*actions); a++)
            for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++) {
                struct ol_policy_req q = {
                    .user = users[u],
                    .action = actions[a],
                    .bucket = "bkt",
                    .key = keys[k],
                    .key_len = keys[k] ? strlen(keys[k]) : 0,
                    .source_ip = ips[(u + a + k) % (sizeof(ips) / sizeof(*ips))],
                    .secure_transport = (u + k) % 2 == 0,
                    .prefix = prefixes[(a + k) % (sizeof(prefixes) / sizeof(*prefixes))],
                };
                enum ol_policy_effect e = ol_policy_eval(p, &q);
                FUZZ_CHECK(e == OL_POLICY_NONE || e == OL_POLICY_ALLOW || e == OL_POLICY_DENY);
                FUZZ_CHECK(ol_policy_eval(p, &q) == e);
                if (e == OL_POLICY_ALLOW)
                    FUZZ_CHECK(ol_policy_may_allow(p, &q));
            }
    ol_policy_free(p);
    return 0;
}
