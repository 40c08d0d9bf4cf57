/* The per-core loop: one io_uring, a pool of fibers, an inbox.
 *
 * A tick of the loop: run the messages other threads posted, run every ready
 * fiber until it parks (each fiber queues its I/O as SQEs and parks), submit
 * all queued SQEs with one system call and wait for at least one completion
 * when nothing is ready, then turn completions back into ready fibers.
 *
 * Fibers are coroutines on mmap'ed stacks with a guard page below.  They
 * switch with Boost.Context's fcontext (make_fcontext / jump_fcontext, plain C
 * linkage) when the build found libboost_context: glibc's swapcontext also
 * saves and restores the signal mask, an rt_sigprocmask system call on every
 * switch, which fcontext does not do (the loop threads never change their
 * mask, so there is nothing to save).  Builds without the library, and
 * AddressSanitizer builds, keep ucontext: ASan learns of stack switches only
 * through swapcontext, so it would report false stack errors on fcontext
 * switches.  Either way the switch stays in a well-kept library rather than
 * in hand-written assembly.
 */
#include "core/loop.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

#if defined(__SANITIZE_ADDRESS__)
#define OL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OL_ASAN 1
#endif
#endif

#if defined(OL_HAVE_FCONTEXT) && !defined(OL_ASAN)
#define OL_USE_FCONTEXT 1
#endif

#ifdef OL_USE_FCONTEXT
/* Boost.Context's C-linkage entry points, declared here because its header is
 * C++ (boost/context/detail/fcontext.hpp, which these copy).  A context is an
 * opaque pointer into a suspended stack; each jump hands the target the
 * context it left behind, so whoever is resumed saves the other side. */
typedef void *fcontext_t;
typedef struct {
    fcontext_t fctx;
    void *data;
} transfer_t;
transfer_t jump_fcontext(fcontext_t const to, void *vp);
fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));
typedef fcontext_t ol_ctx_t;
#else
typedef ucontext_t ol_ctx_t;
#endif

enum fiber_state { F_FREE, F_READY, F_RUNNING, F_PARKED, F_IOWAIT, F_DONE };

struct ol_fiber {
    ol_ctx_t ctx;
    struct ol_loop *loop;
    void *stack;        /* mapping including the guard page */
    size_t map_bytes;
    ol_fiber_fn fn;
    void *arg;
    int state;
    int io_result;
    unsigned fast_streak;  /* socket operations done without parking, in a row */
    struct ol_fiber *next; /* ready list or free list */
};

/* A fiber whose sends keep succeeding at once never parks; after this many in
 * a row it yields, so one busy (e.g. pipelining) client cannot starve the
 * other fibers of its loop. */
#define FAST_STREAK_MAX 16u

#define EVENTFD_TAG ((uint64_t)1)
#define IGNORE_TAG ((uint64_t)2)

struct ol_loop {
    struct io_uring ring;
    struct ol_loop_opts opts;
    ol_ctx_t sched_ctx;
    struct ol_fiber *fibers;     /* max_fibers entries */
    struct ol_fiber *free_list;
    struct ol_fiber *ready_head, *ready_tail;
    struct ol_fiber *current;
    unsigned nfibers;            /* live (spawned, not finished) */
    struct ol_msg_ring inbox;
    int efd;
    uint64_t efd_buf;
    int sleeping;                /* atomic: the loop may block in the kernel */
    int woken;                   /* atomic: this sleep's wakeup is written already */
    int stopping;                /* atomic */
    unsigned sqes_pending;
    /* Idle connections (ol_idle_*): oldest at the head. */
    struct ol_idle *idle_head, *idle_tail;
    unsigned nidle;
    unsigned ncut;               /* cut, connection not finished yet */
};

static __thread struct ol_loop *tl_loop;

struct ol_loop *ol_loop_current(void)
{
    return tl_loop;
}

unsigned ol_loop_id(const struct ol_loop *loop)
{
    return loop->opts.id;
}

unsigned ol_loop_nfibers(const struct ol_loop *loop)
{
    return loop->nfibers;
}

struct ol_fiber *ol_fiber_current(void)
{
    return tl_loop ? tl_loop->current : NULL;
}

uint64_t ol_now_ms(void)
{
    return ol_mono_ms();
}

static void arm_eventfd(struct ol_loop *loop)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->ring);
    if (!sqe) {
        io_uring_submit(&loop->ring);
        sqe = io_uring_get_sqe(&loop->ring);
    }
    OL_ASSERT(sqe != NULL);
    io_uring_prep_read(sqe, loop->efd, &loop->efd_buf, sizeof(loop->efd_buf), 0);
    io_uring_sqe_set_data64(sqe, EVENTFD_TAG);
    loop->sqes_pending++;
}

int ol_loop_create(struct ol_loop **out, const struct ol_loop_opts *opts)
{
    int rc;
    struct ol_loop *loop = calloc(1, sizeof(*loop));
    if (!loop)
        return -ENOMEM;
    loop->opts = *opts;
    if (!loop->opts.sq_entries)
        loop->opts.sq_entries = 256;
    if (!loop->opts.max_fibers)
        loop->opts.max_fibers = 1024;
    if (!loop->opts.stack_bytes)
        loop->opts.stack_bytes = 128 * 1024;
    if (!loop->opts.inbox_slots)
        loop->opts.inbox_slots = 4096;
    loop->efd = -1;

    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    /* The completion queue must hold a completion for every fiber's I/O plus
     * its linked timeout, so that none is ever dropped under load. */
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = loop->opts.max_fibers * 2 + 64;
    if (p.cq_entries < loop->opts.sq_entries * 2)
        p.cq_entries = loop->opts.sq_entries * 2;
    rc = io_uring_queue_init_params(loop->opts.sq_entries, &loop->ring, &p);
    if (rc < 0)
        goto fail_free;
    rc = ol_msg_ring_init(&loop->inbox, loop->opts.inbox_slots);
    if (rc < 0)
        goto fail_ring;
    loop->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (loop->efd < 0) {
        rc = -errno;
        goto fail_inbox;
    }
    loop->fibers = calloc(loop->opts.max_fibers, sizeof(*loop->fibers));
    if (!loop->fibers) {
        rc = -ENOMEM;
        goto fail_efd;
    }
    for (unsigned i = loop->opts.max_fibers; i-- > 0;) {
        loop->fibers[i].loop = loop;
        loop->fibers[i].next = loop->free_list;
        loop->free_list = &loop->fibers[i];
    }
    *out = loop;
    return 0;

fail_efd:
    close(loop->efd);
fail_inbox:
    ol_msg_ring_free(&loop->inbox);
fail_ring:
    io_uring_queue_exit(&loop->ring);
fail_free:
    free(loop);
    return rc;
}

void ol_loop_destroy(struct ol_loop *loop)
{
    if (!loop)
        return;
    for (unsigned i = 0; i < loop->opts.max_fibers; i++)
        if (loop->fibers[i].stack)
            munmap(loop->fibers[i].stack, loop->fibers[i].map_bytes);
    free(loop->fibers);
    close(loop->efd);
    ol_msg_ring_free(&loop->inbox);
    io_uring_queue_exit(&loop->ring);
    free(loop);
}

static void wake_loop(struct ol_loop *loop)
{
    /* One write per sleep: posts that find the wakeup written already (the
     * loop not yet scheduled) skip the system call, which under load is
     * most of them. */
    if (__atomic_load_n(&loop->sleeping, __ATOMIC_SEQ_CST) &&
        !__atomic_exchange_n(&loop->woken, 1, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        ssize_t n = write(loop->efd, &one, sizeof(one));
        (void)n; /* EAGAIN means the counter is already non-zero: it will wake */
    }
}

int ol_loop_post(struct ol_loop *loop, ol_msg_fn fn, void *arg)
{
    int rc = ol_msg_push(&loop->inbox, fn, arg);
    if (rc == 0) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        wake_loop(loop);
    }
    return rc;
}

static void noop_msg(void *arg)
{
    (void)arg;
}

void ol_loop_stop(struct ol_loop *loop)
{
    __atomic_store_n(&loop->stopping, 1, __ATOMIC_SEQ_CST);
    /* Wake it even if the inbox is full: the flag is what matters. */
    if (ol_loop_post(loop, noop_msg, NULL) != 0) {
        uint64_t one = 1;
        ssize_t n = write(loop->efd, &one, sizeof(one));
        (void)n;
    }
}

bool ol_loop_stopping(const struct ol_loop *loop)
{
    return __atomic_load_n(&loop->stopping, __ATOMIC_ACQUIRE) != 0;
}

static void make_ready(struct ol_loop *loop, struct ol_fiber *f)
{
    f->state = F_READY;
    f->next = NULL;
    if (loop->ready_tail)
        loop->ready_tail->next = f;
    else
        loop->ready_head = f;
    loop->ready_tail = f;
}

#ifdef OL_USE_FCONTEXT
static void fiber_trampoline(transfer_t from)
{
    struct ol_loop *loop = tl_loop;
    struct ol_fiber *f = loop->current;
    /* The scheduler's context as it jumped here; the fiber jumps back to it. */
    loop->sched_ctx = from.fctx;
    f->fn(f->arg);
    f->state = F_DONE;
    /* Back to the scheduler, which recycles this fiber; never resumed. */
    jump_fcontext(loop->sched_ctx, NULL);
    OL_ASSERT(!"finished fiber resumed");
}
#else
static void fiber_trampoline(void)
{
    struct ol_loop *loop = tl_loop;
    struct ol_fiber *f = loop->current;
    f->fn(f->arg);
    f->state = F_DONE;
    /* Back to the scheduler, which recycles this fiber; never resumed. */
    swapcontext(&f->ctx, &loop->sched_ctx);
    OL_ASSERT(!"finished fiber resumed");
}
#endif

int ol_fiber_spawn(struct ol_loop *loop, ol_fiber_fn fn, void *arg)
{
    OL_ASSERT(loop == tl_loop);
    struct ol_fiber *f = loop->free_list;
    if (!f)
        return -EAGAIN;
    if (!f->stack) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t bytes = (loop->opts.stack_bytes + page - 1) / page * page + page;
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                       -1, 0);
        if (m == MAP_FAILED)
            return -ENOMEM;
        /* The lowest page is a guard: a stack overflow faults instead of
         * silently overwriting another fiber's stack. */
        if (mprotect(m, page, PROT_NONE) != 0) {
            munmap(m, bytes);
            return -ENOMEM;
        }
        f->stack = m;
        f->map_bytes = bytes;
    }
    loop->free_list = f->next;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef OL_USE_FCONTEXT
    /* make_fcontext takes the top of the stack, which grows down towards the
     * guard page. */
    f->ctx = make_fcontext((char *)f->stack + f->map_bytes, f->map_bytes - page,
                           fiber_trampoline);
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = (char *)f->stack + page;
    f->ctx.uc_stack.ss_size = f->map_bytes - page;
    f->ctx.uc_link = NULL;
    makecontext(&f->ctx, fiber_trampoline, 0);
#endif
    f->fn = fn;
    f->arg = arg;
    loop->nfibers++;
    make_ready(loop, f);
    return 0;
}

static void switch_to_scheduler(struct ol_fiber *f)
{
#ifdef OL_USE_FCONTEXT
    /* The scheduler resumes this fiber with a fresh context of its own. */
    transfer_t t = jump_fcontext(f->loop->sched_ctx, NULL);
    f->loop->sched_ctx = t.fctx;
#else
    swapcontext(&f->ctx, &f->loop->sched_ctx);
#endif
}

void ol_fiber_park(void)
{
    struct ol_fiber *f = ol_fiber_current();
    OL_ASSERT(f != NULL);
    f->state = F_PARKED;
    switch_to_scheduler(f);
}

void ol_fiber_wake(struct ol_fiber *f)
{
    OL_ASSERT(f->loop == tl_loop);
    /* Only an explicitly parked fiber is woken; a fiber waiting for its I/O
     * completion must not be resumed early. */
    if (f->state == F_PARKED)
        make_ready(f->loop, f);
}

void ol_fiber_yield(void)
{
    struct ol_fiber *f = ol_fiber_current();
    if (!f)
        return;
    make_ready(f->loop, f);
    switch_to_scheduler(f);
}

void ol_fiber_trim_stack(void)
{
    struct ol_fiber *f = ol_fiber_current();
    if (!f)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Everything below this frame is unused; one page under it is left
     * alone for the calls this function still makes (madvise itself). */
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = (uintptr_t)f->stack + page; /* above the guard page */
    uintptr_t hi = (sp & ~(uintptr_t)(page - 1)) - page;
    OL_ASSERT(sp > lo && sp <= (uintptr_t)f->stack + f->map_bytes);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ---- idle connections ---- */

void ol_idle_add(struct ol_idle *e, int fd)
{
    struct ol_loop *loop = tl_loop;
    OL_ASSERT(loop != NULL);
    if (e->listed || e->cut)
        return;
    e->fd = fd;
    e->next = NULL;
    e->prev = loop->idle_tail;
    if (loop->idle_tail)
        loop->idle_tail->next = e;
    else
        loop->idle_head = e;
    loop->idle_tail = e;
    e->listed = true;
    loop->nidle++;
}

void ol_idle_del(struct ol_idle *e)
{
    struct ol_loop *loop = tl_loop;
    if (!e->listed)
        return;
    OL_ASSERT(loop != NULL && loop->nidle > 0);
    if (e->prev)
        e->prev->next = e->next;
    else
        loop->idle_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        loop->idle_tail = e->prev;
    e->prev = e->next = NULL;
    e->listed = false;
    loop->nidle--;
}

void ol_idle_done(struct ol_idle *e)
{
    ol_idle_del(e);
    if (e->cut) {
        OL_ASSERT(tl_loop != NULL && tl_loop->ncut > 0);
        tl_loop->ncut--;
        e->cut = false;
    }
}

unsigned ol_idle_cut_oldest(struct ol_loop *loop, unsigned n)
{
    OL_ASSERT(loop == tl_loop);
    unsigned cut = 0;
    /* Bounded by n and by the list, which only shrinks here. */
    while (cut < n && loop->idle_head) {
        struct ol_idle *e = loop->idle_head;
        ol_idle_del(e);
        e->cut = true;
        loop->ncut++;
        /* Both directions: the pending receive (or poll) completes with
         * end-of-file, and the client sees a FIN rather than a reset. */
        shutdown(e->fd, SHUT_RDWR);
        cut++;
    }
    return cut;
}

unsigned ol_idle_cut_pending(const struct ol_loop *loop)
{
    return loop->ncut;
}

unsigned ol_idle_count(const struct ol_loop *loop)
{
    return loop->nidle;
}

/* ---- completions ---- */

static pthread_mutex_t compl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t compl_cv = PTHREAD_COND_INITIALIZER;

void ol_completion_init(struct ol_completion *c)
{
    c->loop = tl_loop;
    c->fiber = ol_fiber_current();
    c->result = 0;
    c->done = 0;
}

static void complete_on_loop(void *arg)
{
    struct ol_completion *c = arg;
    /* Set on the waiter's own thread: the waiter cannot see done (and let its
     * stack frame, which holds c, go away) before this runs. */
    c->done = 1;
    ol_fiber_wake(c->fiber);
}

int ol_completion_wait(struct ol_completion *c)
{
    if (c->fiber) {
        OL_ASSERT(c->fiber == ol_fiber_current());
        while (!c->done)
            ol_fiber_park();
        return c->result;
    }
    pthread_mutex_lock(&compl_mu);
    while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&compl_cv, &compl_mu);
    pthread_mutex_unlock(&compl_mu);
    return c->result;
}

void ol_completion_signal(struct ol_completion *c, int result)
{
    c->result = result;
    if (c->fiber) {
        if (c->loop == tl_loop) {
            complete_on_loop(c);
            return;
        }
        /* The inbox is bounded; the loop drains it every tick, so retrying
         * ends. */
        for (unsigned spins = 0; ol_loop_post(c->loop, complete_on_loop, c) != 0; spins++) {
            if (spins > 64)
                sched_yield();
        }
        return;
    }
    pthread_mutex_lock(&compl_mu);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&compl_cv);
    pthread_mutex_unlock(&compl_mu);
}

/* ---- fiber I/O ---- */

static struct io_uring_sqe *get_sqe(struct ol_loop *loop)
{
    /* Keep room for a linked timeout right behind every operation: a link
     * must not be split across two submissions. */
    if (io_uring_sq_space_left(&loop->ring) < 2) {
        io_uring_submit(&loop->ring);
        loop->sqes_pending = 0;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->ring);
    OL_ASSERT(sqe != NULL);
    loop->sqes_pending++;
    return sqe;
}

/* Queues the prepared sqe (and a linked timeout when asked), parks until its
 * completion, returns the result. */
static int submit_and_park(struct ol_loop *loop, struct io_uring_sqe *sqe, unsigned timeout_ms)
{
    struct ol_fiber *f = loop->current;
    struct __kernel_timespec ts;
    io_uring_sqe_set_data(sqe, f);
    if (timeout_ms) {
        sqe->flags |= IOSQE_IO_LINK;
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
        struct io_uring_sqe *t = io_uring_get_sqe(&loop->ring); /* room kept by get_sqe */
        OL_ASSERT(t != NULL);
        io_uring_prep_link_timeout(t, &ts, 0);
        io_uring_sqe_set_data64(t, IGNORE_TAG);
    }
    f->state = F_IOWAIT;
    f->fast_streak = 0;
    switch_to_scheduler(f);
    int res = f->io_result;
    if (timeout_ms && res == -ECANCELED)
        res = -ETIMEDOUT;
    return res;
}

ssize_t ol_io_recv(int fd, void *buf, size_t len, unsigned timeout_ms)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        ssize_t n = recv(fd, buf, len, 0);
        return n < 0 ? -errno : n;
    }
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_recv(sqe, fd, buf, len, 0);
    return submit_and_park(loop, sqe, timeout_ms);
}

ssize_t ol_io_send(int fd, const void *buf, size_t len, unsigned timeout_ms)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    return ol_io_sendmsg_all(fd, &iov, 1, timeout_ms);
}

ssize_t ol_io_sendmsg_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_ms)
{
    return ol_io_sendmsg_flags(fd, iov, iovcnt, 0, timeout_ms);
}

ssize_t ol_io_sendmsg_flags(int fd, struct iovec *iov, int iovcnt, int flags,
                            unsigned timeout_ms)
{
    return ol_io_sendmsg_paced(fd, iov, iovcnt, flags, timeout_ms, NULL);
}

uint64_t ol_io_pace_deadline(const struct ol_io_pace *p)
{
    OL_ASSERT(p->bytes_per_sec > 0);
    return p->t0_ms + p->slack_ms + p->bytes * 1000u / p->bytes_per_sec;
}

int ol_io_pace_timeout(const struct ol_io_pace *p, unsigned timeout_ms, unsigned *out)
{
    *out = timeout_ms;
    if (!p)
        return 0;
    uint64_t now = ol_now_ms(), deadline = ol_io_pace_deadline(p);
    if (now >= deadline)
        return -ETIMEDOUT;
    if (!timeout_ms || deadline - now < timeout_ms)
        *out = (unsigned)(deadline - now);
    return 0;
}

ssize_t ol_io_sendmsg_paced(int fd, struct iovec *iov, int iovcnt, int flags, unsigned timeout_ms,
                            struct ol_io_pace *pace)
{
    struct ol_loop *loop = tl_loop;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t sent = 0;
    /* Each round makes progress or fails, so the loop ends. */
    while (sent < total) {
        while (iovcnt > 0 && iov->iov_len == 0) {
            iov++;
            iovcnt--;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)iovcnt;
        ssize_t n;
        if (!loop || !loop->current) {
            n = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
            if (n < 0)
                n = -errno;
        } else {
            /* Try the send right away: a response usually fits in the
             * socket's buffer, and then this costs one system call instead
             * of an SQE, a linked timeout, and two fiber switches.  Only when
             * the buffer is full does the send go through the ring (which
             * waits for room, with the timeout). */
            struct ol_fiber *f = loop->current;
            n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT | flags);
            if (n < 0)
                n = -errno;
            if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) {
                unsigned tmo;
                if (ol_io_pace_timeout(pace, timeout_ms, &tmo) < 0)
                    return -ETIMEDOUT;
                struct io_uring_sqe *sqe = get_sqe(loop);
                io_uring_prep_sendmsg(sqe, fd, &mh, (unsigned)(MSG_NOSIGNAL | flags));
                n = submit_and_park(loop, sqe, tmo);
            } else if (n > 0 && ++f->fast_streak >= FAST_STREAK_MAX) {
                f->fast_streak = 0;
                ol_fiber_yield();
            }
        }
        if (n < 0)
            return n;
        if (n == 0)
            return -EPIPE;
        sent += (size_t)n;
        if (pace)
            pace->bytes += (uint64_t)n;
        size_t adv = (size_t)n;
        while (adv > 0 && iovcnt > 0) {
            size_t take = adv < iov->iov_len ? adv : iov->iov_len;
            iov->iov_base = (char *)iov->iov_base + take;
            iov->iov_len -= take;
            adv -= take;
            if (iov->iov_len == 0) {
                iov++;
                iovcnt--;
            }
        }
    }
    return (ssize_t)sent;
}

ssize_t ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms)
{
    struct ol_loop *loop = tl_loop;
    /* sendfile(2) is not an io_uring operation: it is called directly, on a
     * non-blocking socket, and only the wait for room in the socket's buffer
     * goes through the ring (a poll with the linked timeout).  Its source
     * must be in the page cache (ol_store_read_file makes sure), or it would
     * block the loop on the device. */
    for (unsigned round = 0;; round++) {
        off_t o = (off_t)off;
        ssize_t n = sendfile(sock, fd, &o, len);
        if (n > 0) {
            struct ol_fiber *f = loop ? loop->current : NULL;
            if (f && ++f->fast_streak >= FAST_STREAK_MAX) {
                f->fast_streak = 0;
                ol_fiber_yield();
            }
            return n;
        }
        if (n == 0)
            return len ? -EIO : 0; /* the file ends before the range */
        int err = errno;
        if (err == EINTR)
            continue;
        if ((err != EAGAIN && err != EWOULDBLOCK) || !loop || !loop->current)
            return -err;
        /* Woken with room: the next sendfile makes progress unless the
         * connection broke, which it then reports.  The bound only guards
         * against a socket that keeps polling writable yet refuses data. */
        if (round >= 64)
            return -EIO;
        struct io_uring_sqe *sqe = get_sqe(loop);
        io_uring_prep_poll_add(sqe, sock, POLLOUT);
        int rc = submit_and_park(loop, sqe, timeout_ms);
        if (rc < 0)
            return rc;
    }
}

ssize_t ol_io_pread(int fd, void *buf, size_t len, uint64_t off)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        return n < 0 ? -errno : n;
    }
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    return submit_and_park(loop, sqe, 0);
}

ssize_t ol_io_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        return n < 0 ? -errno : n;
    }
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
    return submit_and_park(loop, sqe, 0);
}

int ol_io_fdatasync(int fd)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current)
        return fdatasync(fd) < 0 ? -errno : 0;
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    return submit_and_park(loop, sqe, 0);
}

int ol_io_accept(int fd, unsigned timeout_ms)
{
    return ol_io_accept_addr(fd, NULL, NULL, timeout_ms);
}

int ol_io_accept_addr(int fd, struct sockaddr *addr, socklen_t *addrlen, unsigned timeout_ms)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        int s = accept4(fd, addr, addrlen, SOCK_CLOEXEC);
        return s < 0 ? -errno : s;
    }
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_accept(sqe, fd, addr, addrlen, SOCK_CLOEXEC);
    return submit_and_park(loop, sqe, timeout_ms);
}

int ol_io_poll_in(int fd, unsigned timeout_ms)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, timeout_ms ? (int)timeout_ms : -1);
        if (n < 0)
            return -errno;
        return n == 0 ? -ETIMEDOUT : p.revents;
    }
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_poll_add(sqe, fd, POLLIN | POLLRDHUP);
    return submit_and_park(loop, sqe, timeout_ms);
}

int ol_io_close(int fd)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current)
        return close(fd) < 0 ? -errno : 0;
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_close(sqe, fd);
    return submit_and_park(loop, sqe, 0);
}

int ol_io_sleep_ms(unsigned ms)
{
    struct ol_loop *loop = tl_loop;
    if (!loop || !loop->current) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        return 0;
    }
    struct __kernel_timespec ts = {.tv_sec = ms / 1000,
                                   .tv_nsec = (long long)(ms % 1000) * 1000000};
    struct io_uring_sqe *sqe = get_sqe(loop);
    io_uring_prep_timeout(sqe, &ts, 0, 0);
    int rc = submit_and_park(loop, sqe, 0);
    return rc == -ETIME ? 0 : rc;
}

/* ---- the loop ---- */

static void run_fiber(struct ol_loop *loop, struct ol_fiber *f)
{
    loop->current = f;
    f->state = F_RUNNING;
#ifdef OL_USE_FCONTEXT
    /* The fiber comes back with the context to resume it from next time. */
    transfer_t t = jump_fcontext(f->ctx, NULL);
    f->ctx = t.fctx;
#else
    swapcontext(&loop->sched_ctx, &f->ctx);
#endif
    loop->current = NULL;
    if (f->state == F_DONE) {
        f->state = F_FREE;
        f->next = loop->free_list;
        loop->free_list = f;
        loop->nfibers--;
    }
}

static unsigned reap(struct ol_loop *loop)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&loop->ring, head, cqe)
    {
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == EVENTFD_TAG) {
            arm_eventfd(loop);
        } else if (tag != IGNORE_TAG && tag != 0) {
            struct ol_fiber *f = (struct ol_fiber *)(uintptr_t)tag;
            OL_ASSERT(f->state == F_IOWAIT);
            f->io_result = cqe->res;
            make_ready(loop, f);
        }
        n++;
    }
    io_uring_cq_advance(&loop->ring, n);
    return n;
}

int ol_loop_run(struct ol_loop *loop)
{
    tl_loop = loop;
    arm_eventfd(loop);
    for (;;) {
        /* Messages first: bounded to the ring size so a flood of posts cannot
         * starve the fibers. */
        ol_msg_fn fn;
        void *arg;
        for (uint64_t i = 0; i <= loop->inbox.mask && ol_msg_pop(&loop->inbox, &fn, &arg); i++)
            fn(arg);

        /* Run the fibers that are ready now; fibers made ready while these
         * run wait for the next tick, which keeps one tick bounded. */
        struct ol_fiber *batch = loop->ready_head;
        loop->ready_head = loop->ready_tail = NULL;
        while (batch) {
            struct ol_fiber *f = batch;
            batch = f->next;
            run_fiber(loop, f);
        }

        if (ol_loop_stopping(loop) && loop->nfibers == 0)
            break;

        int rc;
        if (loop->ready_head || !ol_msg_empty(&loop->inbox)) {
            rc = io_uring_submit(&loop->ring);
        } else {
            /* Reset before sleeping is set: a post that sees this sleep
             * writes its wakeup (wake_loop). */
            __atomic_store_n(&loop->woken, 0, __ATOMIC_SEQ_CST);
            __atomic_store_n(&loop->sleeping, 1, __ATOMIC_SEQ_CST);
            if (!ol_msg_empty(&loop->inbox))
                rc = io_uring_submit(&loop->ring);
            else
                rc = io_uring_submit_and_wait(&loop->ring, 1);
            __atomic_store_n(&loop->sleeping, 0, __ATOMIC_SEQ_CST);
        }
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) {
            ol_error("loop %u: io_uring submit failed: %s", loop->opts.id, strerror(-rc));
            tl_loop = NULL;
            return rc;
        }
        loop->sqes_pending = 0;
        reap(loop);
    }
    tl_loop = NULL;
    return 0;
}
