#include "native/proto.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/sha256.h"

void ol_native_key(const char *access_key, const char *secret_key,
                   uint8_t key[OL_NET_KEY_BYTES])
{
    char k[9 + 129];
    int kn = snprintf(k, sizeof(k), "OPENLAKE1%s", secret_key);
    if (kn < 0 || (size_t)kn >= sizeof(k))
        kn = (int)sizeof(k) - 1;
    static const char pfx[] = "openlake-native/1/";
    struct ol_bytes msg[2] = {{pfx, sizeof(pfx) - 1}, {access_key, strlen(access_key)}};
    /* A failed HMAC (no memory in OpenSSL) leaves a key no peer derives:
     * every message then fails its check, nothing passes unchecked. */
    if (ol_hmac_sha256(k, (size_t)kn, msg, 2, key) != 0)
        memset(key, 0xa5, OL_NET_KEY_BYTES);
    OPENSSL_cleanse(k, sizeof(k));
}
