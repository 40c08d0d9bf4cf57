/* A drive's lock table: the in-memory state behind ec/drive.h's lock and
 * unlock, shared by the drives that keep it themselves (ec/storedrive.c,
 * ec/memdrive.c).  The contract of the calls is drive.h's; this adds how the
 * table is kept.
 *
 * Names are kept as a 64-bit hash of their bytes (with the length), not
 * whole: two names that collide share one lock.  That costs only waiting
 * (a conditional commit of one key waits for another's) and never lets two
 * owners hold one name, so the table needs no room for names of up to
 * OL_DRIVE_LOCK_NAME_MAX bytes.
 *
 * Limits: at most `slots` names held at once (-ENOLCK beyond; an expired
 * entry is free).  Every call is a scan of the slots under one mutex: the
 * table serves conditional commits, not the data path.
 *
 * Threads: any thread, any number at once.  Time: the caller passes now_ms
 * (ol_now_ms(): monotonic), so tests can move the clock.
 */
#ifndef OL_EC_LOCKTAB_H
#define OL_EC_LOCKTAB_H

#include <stddef.h>
#include <stdint.h>

enum {
    OL_LOCKTAB_SLOTS = 1024, /* default */
};

struct ol_locktab;

/* slots 0: OL_LOCKTAB_SLOTS.  -ENOMEM. */
int ol_locktab_create(unsigned slots, struct ol_locktab **out);
void ol_locktab_destroy(struct ol_locktab *t);

/* drive.h's lock and unlock (0, -EBUSY, -ENOLCK, -EINVAL; unlock: 0 or
 * -EINVAL). */
int ol_locktab_lock(struct ol_locktab *t, const void *name, size_t nlen, const uint8_t *owner,
                    uint32_t ttl_ms, uint64_t now_ms);
int ol_locktab_unlock(struct ol_locktab *t, const void *name, size_t nlen, const uint8_t *owner);
/* Locks held (not expired) at now_ms: tests and metrics. */
unsigned ol_locktab_held(struct ol_locktab *t, uint64_t now_ms);
/* Forgets every lock: what a restart of the drive's process does (tests). */
void ol_locktab_clear(struct ol_locktab *t);

#endif
