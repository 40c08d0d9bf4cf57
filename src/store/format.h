/* The drive's format file (DIR/FORMAT): identifies a directory as an
 * OpenLake drive.  Internal to src/store; docs/FORMAT.md has the layout. */
#ifndef OL_STORE_FORMAT_H
#define OL_STORE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define OL_FORMAT_MAGIC 0x4b52444cu /* "LDRK" */
/* Version 2 added the bconf database (bucket settings) and entries with an
 * attribute section (entry version 2).  A version-1 drive is upgraded in
 * place at open: the new databases are created empty, then FORMAT is
 * rewritten; builds that know only version 1 refuse the upgraded drive.
 * Version 3 added the versions database (object versions, delete markers)
 * and object-DB keys up to 1097 bytes in groups; upgraded the same way. */
#define OL_FORMAT_VERSION 3u
#define OL_FORMAT_VERSION_MIN 1u
#define OL_FORMAT_NAME "FORMAT"

struct ol_format {
    uint32_t magic;
    uint16_t version;
    uint16_t hdr_bytes; /* sizeof(struct ol_format) */
    uint8_t deployment_id[16];
    uint8_t drive_id[16];
    int64_t created_ns;
    uint8_t reserved[76];
    uint32_t crc; /* CRC32C of the struct with this field 0 */
};
_Static_assert(sizeof(struct ol_format) == 128, "format file is 128 bytes");

/* Reads DIR/FORMAT.  -ENOENT if absent, -OL_EFORMAT if damaged or foreign. */
int ol_format_read(int dir_fd, struct ol_format *out);
/* Creates a new format (random ids) and writes it durably: temporary file,
 * fsync, rename, directory fsync. */
int ol_format_create(int dir_fd, struct ol_format *out);
/* Writes f durably (temporary file, fsync, rename, directory fsync),
 * computing its CRC. */
int ol_format_write(int dir_fd, const struct ol_format *f);
/* Fills buf with random bytes (getrandom). */
int ol_random(void *buf, size_t len);

#endif
