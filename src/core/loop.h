/* The per-core event loop and the fibers that run on it.
 *
 * OpenLake is thread-per-core: each core runs one ol_loop on its own thread,
 * with its own io_uring.  Work on a loop runs in fibers (small stackful
 * coroutines); a fiber that calls ol_io_*() queues one io_uring operation and
 * yields, and the loop resumes it when the completion arrives.  This keeps the
 * request handlers straight-line code while every core submits and reaps all of
 * its I/O in batches, with one io_uring_submit_and_wait() per loop tick.
 *
 * Thread rules:
 *  - A fiber belongs to the loop that spawned it and only ever runs there.
 *  - ol_fiber_*() and ol_io_*() are called from the loop's own thread.
 *  - ol_loop_post() and ol_completion_signal() may be called from any thread;
 *    they are the only way other threads talk to a loop.
 *  - ol_io_*() called outside a fiber (unit tests, helper threads) fall back to
 *    the plain blocking system call, so the same code runs in both places.
 *
 * All functions return 0 / a byte count, or a negative errno.
 */
#ifndef OL_CORE_LOOP_H
#define OL_CORE_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct ol_loop;
struct ol_fiber;

typedef void (*ol_fiber_fn)(void *arg);
#include "core/msg.h"

struct ol_loop_opts {
    unsigned id;            /* core index, 0..n-1 */
    unsigned sq_entries;    /* io_uring submission queue size */
    unsigned max_fibers;    /* preallocated fiber pool size; spawn fails past it */
    size_t stack_bytes;     /* per fiber stack (plus a guard page) */
    unsigned inbox_slots;   /* cross-thread message ring size (power of two) */
};

int ol_loop_create(struct ol_loop **out, const struct ol_loop_opts *opts);
void ol_loop_destroy(struct ol_loop *loop);

/* Runs until ol_loop_stop() has been called and every fiber has returned. */
int ol_loop_run(struct ol_loop *loop);

/* Asks the loop to stop: sets the stopping flag (ol_loop_stopping) and wakes
 * it.  Fibers see the flag and finish; thread-safe. */
void ol_loop_stop(struct ol_loop *loop);
bool ol_loop_stopping(const struct ol_loop *loop);

struct ol_loop *ol_loop_current(void); /* NULL outside a loop thread */
unsigned ol_loop_id(const struct ol_loop *loop);
unsigned ol_loop_nfibers(const struct ol_loop *loop);

/* Runs fn(arg) on `loop`'s thread, soon.  Any thread.  -EAGAIN when the
 * loop's inbox is full (the caller backs off and retries). */
int ol_loop_post(struct ol_loop *loop, ol_msg_fn fn, void *arg);

/* Starts a fiber on the current loop (loop thread only).  -EAGAIN when the
 * fiber pool is exhausted: the caller treats that as backpressure. */
int ol_fiber_spawn(struct ol_loop *loop, ol_fiber_fn fn, void *arg);
struct ol_fiber *ol_fiber_current(void); /* NULL outside a fiber */
void ol_fiber_park(void);                 /* sleep until ol_fiber_wake() */
void ol_fiber_wake(struct ol_fiber *f);   /* same loop thread only */
void ol_fiber_yield(void);                /* let other ready fibers run */

/* A one-shot completion that works for a fiber (parks it) and for a plain
 * thread (blocks on a condition variable).  Signal from any thread, once. */
struct ol_completion {
    struct ol_loop *loop;
    struct ol_fiber *fiber;
    int result;
    int done; /* accessed atomically */
};
void ol_completion_init(struct ol_completion *c);
int ol_completion_wait(struct ol_completion *c); /* returns the result */
void ol_completion_signal(struct ol_completion *c, int result);

/* Fiber I/O.  timeout_ms == 0 means no timeout; a timeout returns -ETIMEDOUT.
 * ol_io_send() sends all of buf (or fails). */
ssize_t ol_io_recv(int fd, void *buf, size_t len, unsigned timeout_ms);
ssize_t ol_io_send(int fd, const void *buf, size_t len, unsigned timeout_ms);
ssize_t ol_io_sendmsg_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_ms);
/* ol_io_sendmsg_all with extra send flags (MSG_MORE: more follows at once). */
ssize_t ol_io_sendmsg_flags(int fd, struct iovec *iov, int iovcnt, int flags,
                            unsigned timeout_ms);
/* A minimum data rate over a transfer made of many calls: by ol_now_ms()
 * time t, at least (t - t0_ms - slack_ms) * bytes_per_sec / 1000 bytes must
 * have moved.  Each byte moved buys 1000 / bytes_per_sec ms, so a peer at
 * the rate or faster never runs out of time however long the transfer, and
 * one that takes a byte now and then (every wait shorter than the I/O
 * timeout) does.  The caller sets the first three fields; the I/O calls
 * that take it add what they move to bytes. */
struct ol_io_pace {
    uint64_t t0_ms;
    uint64_t slack_ms;
    uint64_t bytes_per_sec; /* > 0 */
    uint64_t bytes;
};
/* When the pace runs out (ol_now_ms() time). */
uint64_t ol_io_pace_deadline(const struct ol_io_pace *p);
/* timeout_ms cut to what is left of the pace (pace NULL: timeout_ms);
 * -ETIMEDOUT once it has run out. */
int ol_io_pace_timeout(const struct ol_io_pace *p, unsigned timeout_ms, unsigned *out);
/* ol_io_sendmsg_flags held to a pace (NULL: none): each wait for room is cut
 * to what is left of it, and -ETIMEDOUT comes once it has run out. */
ssize_t ol_io_sendmsg_paced(int fd, struct iovec *iov, int iovcnt, int flags, unsigned timeout_ms,
                            struct ol_io_pace *pace);
/* Sends up to len bytes of file fd at off to socket sock with sendfile(2);
 * returns the count sent (> 0, maybe fewer than len) or an error.  In a fiber
 * the socket must be O_NONBLOCK: a full socket buffer parks the fiber until
 * there is room.  The file range should be in the page cache. */
ssize_t ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms);
ssize_t ol_io_pread(int fd, void *buf, size_t len, uint64_t off);
ssize_t ol_io_pwrite(int fd, const void *buf, size_t len, uint64_t off);
int ol_io_fdatasync(int fd);
int ol_io_accept(int fd, unsigned timeout_ms);
/* ol_io_accept that also reports the peer's address (addr, *addrlen in/out as
 * for accept(2); both must stay valid until it returns, as a fiber's stack
 * does). */
int ol_io_accept_addr(int fd, struct sockaddr *addr, socklen_t *addrlen, unsigned timeout_ms);
/* Waits until fd is readable (POLLIN, or hang-up/error) without reading:
 * a connection waiting for its next request holds no receive buffer.
 * Returns the poll revents (> 0), -ETIMEDOUT, or another negative errno. */
int ol_io_poll_in(int fd, unsigned timeout_ms);
int ol_io_close(int fd);
int ol_io_sleep_ms(unsigned ms);

/* Gives the unused part of the calling fiber's stack back to the kernel
 * (madvise MADV_DONTNEED below the current stack pointer).  A fiber that ran
 * a deep handler keeps those pages resident for as long as it lives, and its
 * pool slot keeps them after it; a connection that goes idle calls this so
 * that an idle connection costs a page or two of stack, not the high-water
 * mark of the deepest request it ever served.  No-op outside a fiber. */
void ol_fiber_trim_stack(void);

/* Idle connections, oldest first, per loop (an intrusive LRU list).  A
 * connection fiber adds its entry while it waits for a request head (nothing
 * buffered, or a head not yet complete) and removes it before it serves the
 * request.  When the loop runs short of connection slots, the accept path
 * cuts the oldest ones (ol_idle_cut_oldest): shutdown(2) of the socket ends
 * the fiber's pending wait with end-of-file, the fiber then finishes as for a
 * client that closed, and its slot frees.  Loop thread only; the entry lives
 * in the connection's memory and must be removed (ol_idle_del) before that
 * memory goes. */
struct ol_idle {
    struct ol_idle *prev, *next;
    int fd;
    bool listed; /* on the loop's list now */
    bool cut;    /* cut by ol_idle_cut_oldest: the connection must close */
};
/* Appends e (fd: the connection's socket) as the newest idle entry of the
 * current loop.  A no-op for an entry that is listed or was cut. */
void ol_idle_add(struct ol_idle *e, int fd);
/* Removes e from the list (a no-op when it is not listed). */
void ol_idle_del(struct ol_idle *e);
/* Settles a cut entry when its connection is gone: call once, after the
 * socket is closed, so ol_idle_cut_pending stops counting it. */
void ol_idle_done(struct ol_idle *e);
/* Cuts up to n of loop's oldest idle entries; returns how many were cut. */
unsigned ol_idle_cut_oldest(struct ol_loop *loop, unsigned n);
/* Entries cut whose connections have not finished yet (their slots are
 * about to free). */
unsigned ol_idle_cut_pending(const struct ol_loop *loop);
/* Idle entries listed now. */
unsigned ol_idle_count(const struct ol_loop *loop);

/* Milliseconds on the monotonic clock. */
uint64_t ol_now_ms(void);

#endif
