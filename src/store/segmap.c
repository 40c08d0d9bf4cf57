/* Read-only mappings of segment files, for zero-copy GETs.
 *
 * A large GET is sent with sendfile(2) from the page cache
 * (ol_store_read_file in store.c), after the store has checked the blocks'
 * CRCs on the very page-cache pages that sendfile will send.  Reading them
 * through a mapping costs one pass over the bytes (the CRC itself); reading
 * them with pread would copy every byte out first, which measured as the
 * largest item of a zero-copy GET's server profile.
 *
 * Each segment is mapped once, whole, on first use, and stays mapped until
 * the segment is freed: mapping and unmapping per request would cost page
 * faults and, with several loop threads in the process, TLB shootdowns.  The
 * kernel still owns the pages: it evicts them as it likes and unmaps them
 * from us when it does.  The cost is address space (segment size plus slack
 * per segment) and page-table entries for the pages touched, about 2 MiB per
 * GiB of hot data; past SEG_MAP_MAX mapped segments the rest use the copy
 * path.
 *
 * A mapping is only read where mincore() says the pages are in the page
 * cache, so a read never waits for the device on a loop thread.  Should the
 * kernel evict a page between the mincore() and the read, and the device then
 * fail the page-in, the access raises SIGBUS instead of returning an error;
 * the check runs under a guard that turns that SIGBUS into -EIO (the caller
 * then reads through its ordinary path, which reports the error). */
#include "store/store_internal.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

/* Room past the configured segment size: a segment rolls over only after the
 * reservation that crosses the size, so a file can be a little longer. */
#define SEG_MAP_SLACK (64ull << 20)
#define PAGE 4096u
/* At most this many segments are mapped at once, process-wide; past it new
 * segments are read through the copy path.  Each mapping is one entry of the
 * process's map table, whose size the kernel caps (vm.max_map_count, 65530
 * by default), and malloc and LMDB need entries too.  8192 mappings cover
 * 2 TiB of segments at the default segment size. */
#define SEG_MAP_MAX 8192u

static atomic_uint nmapped;

const uint8_t *ol_seg_map(struct ol_store *st, struct ol_seg *seg, int fd, uint64_t *len)
{
    const uint8_t *m = atomic_load_explicit(&seg->map, memory_order_acquire);
    if (m) {
        *len = atomic_load_explicit(&seg->map_len, memory_order_relaxed);
        return m;
    }
    if (atomic_fetch_add(&nmapped, 1) >= SEG_MAP_MAX) {
        atomic_fetch_sub(&nmapped, 1);
        return NULL;
    }
    uint64_t size = atomic_load(&seg->size);
    uint64_t want = st->o.segment_bytes > size ? st->o.segment_bytes : size;
    want = ol_round_up(want + SEG_MAP_SLACK, 2u << 20);
    void *p = mmap(NULL, (size_t)want, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        atomic_fetch_sub(&nmapped, 1);
        return NULL;
    }
    /* Random access: the kernel's readahead on faults would read around
     * every touched page; we only touch pages already in the cache. */
    (void)madvise(p, (size_t)want, MADV_RANDOM);
    atomic_store_explicit(&seg->map_len, want, memory_order_relaxed);
    const uint8_t *expect = NULL;
    if (!atomic_compare_exchange_strong(&seg->map, &expect, (const uint8_t *)p)) {
        munmap(p, (size_t)want); /* another thread mapped it first */
        atomic_fetch_sub(&nmapped, 1);
        *len = atomic_load_explicit(&seg->map_len, memory_order_relaxed);
        return expect;
    }
    *len = want;
    return p;
}

void ol_seg_unmap(struct ol_seg *seg)
{
    const uint8_t *m = atomic_load(&seg->map);
    if (m) {
        munmap((void *)m, (size_t)atomic_load(&seg->map_len));
        atomic_fetch_sub(&nmapped, 1);
    }
    atomic_store(&seg->map, NULL);
}

uint64_t ol_seg_resident(const uint8_t *map, uint64_t off, uint64_t len)
{
    uint64_t p0 = off / PAGE * PAGE;
    uint64_t end = off + len;
    uint64_t done = p0;
    unsigned char vec[256];
    /* Each round looks at up to 256 pages (1 MiB), stops at the first page
     * that is not resident. */
    while (done < end) {
        uint64_t span = end - done;
        if (span > sizeof(vec) * (uint64_t)PAGE)
            span = sizeof(vec) * (uint64_t)PAGE;
        if (mincore((void *)(map + done), (size_t)span, vec) != 0)
            break;
        size_t pages = (size_t)((span + PAGE - 1) / PAGE);
        size_t i = 0;
        while (i < pages && (vec[i] & 1))
            i++;
        if (i < pages) {
            done += (uint64_t)i * PAGE;
            break;
        }
        done += span;
    }
    if (done <= off)
        return 0;
    return (done < end ? done : end) - off;
}

/* The SIGBUS guard: a thread that reads a mapping sets tl_guard; the handler
 * jumps back to it.  SA_NODEFER keeps SIGBUS unblocked after the jump, so
 * the jump buffer need not save the signal mask (which would cost a system
 * call on every check). */
static __thread sigjmp_buf *tl_guard;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static struct sigaction prev_bus;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    if (tl_guard)
        siglongjmp(*tl_guard, 1);
    /* Not ours: hand it to whoever had it before (default: terminate). */
    if (prev_bus.sa_flags & SA_SIGINFO) {
        prev_bus.sa_sigaction(sig, si, uc);
        return;
    }
    if (prev_bus.sa_handler != SIG_IGN && prev_bus.sa_handler != SIG_DFL) {
        prev_bus.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

static void guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &prev_bus) != 0)
        ol_warn("store: cannot install the SIGBUS guard for segment mappings");
}

int ol_seg_map_check(const uint8_t *p, uint64_t len, uint32_t bb, const uint32_t *crcs,
                     uint64_t *good)
{
    pthread_once(&guard_once, guard_install);
    sigjmp_buf jb;
    /* volatile: read after a jump back into this frame */
    volatile uint64_t b = 0;
    if (sigsetjmp(jb, 0) != 0) {
        tl_guard = NULL;
        *good = b;
        return -EIO;
    }
    tl_guard = &jb;
    int rc = 0;
    for (; b < len; b += bb) {
        size_t bl = len - b < bb ? (size_t)(len - b) : bb;
        if (ol_crc32c(p + b, bl) != crcs[b / bb]) {
            rc = -OL_ECORRUPT;
            break;
        }
    }
    tl_guard = NULL;
    *good = b;
    return rc;
}
