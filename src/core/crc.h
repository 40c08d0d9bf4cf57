/* CRC32C (Castagnoli), through ISA-L's crc32_iscsi, which uses the CPU's CRC
 * instructions.  A thin wrapper so that the rest of the tree has one name and
 * one convention for it: seed 0, no pre/post inversion surprises. */
#ifndef OL_CORE_CRC_H
#define OL_CORE_CRC_H

#include <stddef.h>
#include <stdint.h>

/* Standard CRC32C of buf (the value RFC 3720 / S3's x-amz-checksum-crc32c use). */
uint32_t ol_crc32c(const void *buf, size_t len);
/* Continues a CRC32C: ol_crc32c_extend(ol_crc32c(a), b) == ol_crc32c(a||b). */
uint32_t ol_crc32c_extend(uint32_t crc, const void *buf, size_t len);

#endif
