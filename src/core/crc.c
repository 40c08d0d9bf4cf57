#include "core/crc.h"

#include <isa-l/crc.h>

/* ISA-L's crc32_iscsi takes and returns the CRC register without the final
 * inversion; standard CRC32C is ~crc32_iscsi(buf, len, ~0). */
uint32_t ol_crc32c_extend(uint32_t crc, const void *buf, size_t len)
{
    return ~crc32_iscsi((unsigned char *)buf, (int)len, ~crc);
}

uint32_t ol_crc32c(const void *buf, size_t len)
{
    return ol_crc32c_extend(0, buf, len);
}
