#include "core/hex.h"

void ol_hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static int val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool ol_unhex(const char *p, size_t plen, uint8_t *out, size_t n)
{
    if (plen != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        int a = val(p[2 * i]), b = val(p[2 * i + 1]);
        if (a < 0 || b < 0)
            return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}
