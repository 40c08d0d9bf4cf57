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
    /* Membership of an erasure-coded deployment (docs/EC.md, "Deployment
     * identity").  These bytes were reserved (zero) before, so a drive
     * written by an older build reads as "not joined" and no version bump
     * is needed.  While ec_joined is 1, deployment_id is the deployment's
     * (the same on every drive of it, and the placement key) instead of the
     * drive's own random one. */
    uint8_t ec_joined;   /* 0: not a member of an EC deployment; 1: a member */
    uint8_t ec_k, ec_m;  /* the deployment's data and parity shards per set */
    uint8_t ec_pad;      /* zero */
    uint32_t ec_index;   /* this drive's position, 0..ec_ndrives-1 */
    uint32_t ec_ndrives; /* drives in the deployment */
    uint8_t reserved[64];
    uint32_t crc; /* CRC32C of the struct with this field 0 */
};
_Static_assert(sizeof(struct ol_format) == 128, "format file is 128 bytes");
_Static_assert(offsetof(struct ol_format, ec_joined) == 48, "EC fields start at 48");
_Static_assert(offsetof(struct ol_format, ec_index) == 52, "ec_index at 52");
_Static_assert(offsetof(struct ol_format, ec_ndrives) == 56, "ec_ndrives at 56");
_Static_assert(offsetof(struct ol_format, reserved) == 60, "reserved at 60");

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
