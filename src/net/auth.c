#include "net/auth.h"

#include <string.h>

#include <openssl/crypto.h>

#include "core/hlc.h"
#include "core/sha256.h"

static void mac_of(const uint8_t key[OL_NET_KEY_BYTES], const struct ol_wire_hdr *h,
                   const void *ctl, size_t ctl_len, uint8_t out[OL_WIRE_MAC_BYTES])
{
    struct ol_wire_hdr z = *h;
    memset(z.mac, 0, sizeof(z.mac));
    struct ol_bytes parts[2] = {{&z, sizeof(z)}, {ctl, ctl_len}};
    uint8_t full[32];
    /* When OpenSSL cannot allocate, the MAC is all ones: a message signed
     * so is refused by its receiver, and a check fails (it matches a real
     * MAC with negligible probability), so nothing passes unchecked. */
    if (ol_hmac_sha256(key, OL_NET_KEY_BYTES, parts, ctl_len ? 2 : 1, full) != 0)
        memset(full, 0xff, sizeof(full));
    memcpy(out, full, OL_WIRE_MAC_BYTES);
    OPENSSL_cleanse(full, sizeof(full));
}

void ol_wire_sign(const uint8_t key[OL_NET_KEY_BYTES], struct ol_wire_hdr *h, const void *ctl,
                  size_t ctl_len)
{
    mac_of(key, h, ctl, ctl_len, h->mac);
}

bool ol_wire_verify(const uint8_t key[OL_NET_KEY_BYTES], const struct ol_wire_hdr *h,
                    const void *ctl, size_t ctl_len)
{
    uint8_t want[OL_WIRE_MAC_BYTES];
    mac_of(key, h, ctl, ctl_len, want);
    return CRYPTO_memcmp(want, h->mac, sizeof(want)) == 0;
}

bool ol_wire_fresh(uint64_t hlc, uint64_t now_ms)
{
    uint64_t ms = ol_hlc_stamp_ms(hlc);
    uint64_t d = ms > now_ms ? ms - now_ms : now_ms - ms;
    return d <= OL_NET_AUTH_WINDOW_MS;
}
