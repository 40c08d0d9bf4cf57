/* The decrypt pool: see obj/sse_pool.h.  One mutex guards the queue, the
 * jobs' states and the blocks: a job is a whole window (~1 MiB, ~200 us of
 * AES-GCM), so a lock taken a few times per job is nothing next to it. */
#include "obj/sse_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/log.h"

enum { JOB_QUEUED = 1, JOB_RUNNING, JOB_DONE };

static struct {
    pthread_mutex_t mu;
    unsigned spin_us, spin_threads; /* see worker_spin */
    unsigned spinning;              /* threads in worker_spin now */
    pthread_cond_t cv;         /* a job was queued, or stop */
    pthread_cond_t idle;       /* a job finished (for stop) */
    struct ol_sse_job *head, *tail;
    unsigned queued; /* changed under mu, read unlocked by spinners (atomics) */
    unsigned running;
    bool stop;
    unsigned nthreads;
    pthread_t th[OL_SSE_POOL_THREADS_MAX];
    unsigned cap, out;         /* blocks allowed and taken */
    unsigned nkept;            /* freed blocks kept for reuse */
    void *kept[OL_SSE_POOL_THREADS_MAX];
} g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

/* Measured (bench/RESULTS.md, "Encrypted GETs on a decrypt pool"): on the
 * 2-core VM the pool's threads take the core the other loop thread needs
 * (every GET there is already CPU-bound with 2 loop threads), so below 4
 * cores it stays off.  From 4 up, one thread per core, at most 16: they
 * sleep unless a large encrypted read keeps them busy, and a request uses
 * at most OL_SSE_AHEAD of them at a time. */
unsigned ol_sse_pool_auto(long cores)
{
    if (cores < 4)
        return 0;
    return cores > 16 ? 16u : (unsigned)cores;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000;
}

/* Called with mu held and the queue empty, by a thread that just finished
 * a job.  A short read's window is opened in parts of ~70 us
 * (obj/sse.c, win_open_split), and a sleeping thread's wake-up takes about
 * as long, so parts handed to a sleeping pool are mostly taken back by the
 * loop thread (bench/RESULTS.md, "Windows opened in parts").  So up to
 * spin_threads threads stay awake for spin_us after their last job,
 * watching the queue without the lock: a client's next GET finds them
 * running.  Only after a job: a pool with no encrypted reads sleeps.
 * Returns with mu held. */
static void worker_spin(void)
{
    if (g.spinning >= g.spin_threads || g.spin_us == 0)
        return;
    g.spinning++;
    pthread_mutex_unlock(&g.mu);
    uint64_t end = now_us() + g.spin_us;
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&g.queued, __ATOMIC_ACQUIRE) > 0 ||
            __atomic_load_n(&g.stop, __ATOMIC_ACQUIRE))
            break;
        cpu_relax();
        if (n % 64 == 0 && now_us() >= end)
            break;
    }
    pthread_mutex_lock(&g.mu);
    /* The caller looks at the queue again under mu before it sleeps: a
     * submit that saw this thread spinning skipped its signal. */
    g.spinning--;
}

static void *worker_main(void *arg)
{
    (void)arg;
    bool worked = false;
    pthread_mutex_lock(&g.mu);
    for (;;) {
        if (!g.head && !g.stop && worked)
            worker_spin();
        worked = false;
        while (!g.head && !g.stop)
            pthread_cond_wait(&g.cv, &g.mu);
        if (!g.head)
            break; /* stop, with nothing queued */
        struct ol_sse_job *j = g.head;
        g.head = j->next;
        if (!g.head)
            g.tail = NULL;
        __atomic_store_n(&g.queued, g.queued - 1, __ATOMIC_RELAXED);
        g.running++;
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&g.mu);

        j->run(j);

        pthread_mutex_lock(&g.mu);
        __atomic_store_n(&j->state, JOB_DONE, __ATOMIC_RELEASE); /* ol_sse_pool_finish spins on it */
        g.running--;
        bool ab = j->abandoned;
        struct ol_completion *w = j->waiter;
        j->waiter = NULL;
        if (g.stop && !g.queued && !g.running)
            pthread_cond_broadcast(&g.idle);
        pthread_mutex_unlock(&g.mu);
        /* Outside the lock: drop gives blocks back (it locks), and a
         * signal may post to a loop's inbox. */
        if (ab)
            j->drop(j);
        else if (w)
            ol_completion_signal(w, 0);
        pthread_mutex_lock(&g.mu);
        worked = true;
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

int ol_sse_pool_start(unsigned n, unsigned blocks_per_thread, unsigned spin_us)
{
    if (n > OL_SSE_POOL_THREADS_MAX || (n > 0 && blocks_per_thread == 0) ||
        spin_us > OL_SSE_POOL_SPIN_MAX_US)
        return -EINVAL;
    pthread_mutex_lock(&g.mu);
    int rc = 0;
    if (g.nthreads == 0) {
        __atomic_store_n(&g.stop, false, __ATOMIC_RELAXED);
        g.spin_us = spin_us;
        g.spin_threads = n < OL_SSE_POOL_SPIN_THREADS ? n : OL_SSE_POOL_SPIN_THREADS;
        g.cap = n * blocks_per_thread;
        for (unsigned i = 0; i < n; i++) {
            rc = -pthread_create(&g.th[i], NULL, worker_main, NULL);
            if (rc < 0)
                break;
            g.nthreads++;
        }
    }
    pthread_mutex_unlock(&g.mu);
    return rc;
}

void ol_sse_pool_stop(void)
{
    pthread_mutex_lock(&g.mu);
    __atomic_store_n(&g.stop, true, __ATOMIC_RELEASE); /* spinners watch it */
    pthread_cond_broadcast(&g.cv);
    while (g.queued || g.running)
        pthread_cond_wait(&g.idle, &g.mu);
    unsigned n = g.nthreads;
    pthread_mutex_unlock(&g.mu);
    for (unsigned i = 0; i < n; i++)
        pthread_join(g.th[i], NULL);
    pthread_mutex_lock(&g.mu);
    g.nthreads = 0;
    g.cap = 0;
    while (g.nkept)
        free(g.kept[--g.nkept]);
    pthread_mutex_unlock(&g.mu);
}

unsigned ol_sse_pool_threads(void)
{
    return __atomic_load_n(&g.nthreads, __ATOMIC_RELAXED);
}

void *ol_sse_pool_block_take(void)
{
    void *b = NULL;
    pthread_mutex_lock(&g.mu);
    if (g.out < g.cap) {
        b = g.nkept ? g.kept[--g.nkept] : malloc(OL_SSE_POOL_BLOCK);
        if (b)
            g.out++;
    }
    pthread_mutex_unlock(&g.mu);
    return b;
}

void ol_sse_pool_block_give(void *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&g.mu);
    OL_ASSERT(g.out > 0);
    g.out--;
    /* Kept: at most one per thread (what a steady load reuses); the rest
     * goes back to the allocator. */
    if (g.nkept < g.nthreads && g.nkept < OL_SSE_POOL_THREADS_MAX) {
        g.kept[g.nkept++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&g.mu);
    free(b);
}

unsigned ol_sse_pool_blocks_out(void)
{
    pthread_mutex_lock(&g.mu);
    unsigned n = g.out;
    pthread_mutex_unlock(&g.mu);
    return n;
}

void ol_sse_pool_submit(struct ol_sse_job *j)
{
    j->next = NULL;
    j->abandoned = false;
    j->waiter = NULL;
    pthread_mutex_lock(&g.mu);
    OL_ASSERT(g.nthreads > 0);
    j->state = JOB_QUEUED;
    if (g.tail)
        g.tail->next = j;
    else
        g.head = j;
    g.tail = j;
    __atomic_store_n(&g.queued, g.queued + 1, __ATOMIC_RELEASE);
    /* A spinning thread takes the job without a wake-up (it checks the
     * queue under mu before it sleeps); wake one only for jobs beyond the
     * spinners. */
    if (g.queued > g.spinning)
        pthread_cond_signal(&g.cv);
    pthread_mutex_unlock(&g.mu);
}

bool ol_sse_pool_done(struct ol_sse_job *j)
{
    pthread_mutex_lock(&g.mu);
    bool d = j->state == JOB_DONE;
    pthread_mutex_unlock(&g.mu);
    return d;
}

void ol_sse_pool_wait(struct ol_sse_job *j)
{
    struct ol_completion c;
    pthread_mutex_lock(&g.mu);
    bool wait = j->state != JOB_DONE;
    if (wait) {
        ol_completion_init(&c);
        j->waiter = &c;
    }
    pthread_mutex_unlock(&g.mu);
    if (wait)
        ol_completion_wait(&c);
}

/* Unlinks a queued job (the queue is short: a few windows per reader). */
static void unqueue(struct ol_sse_job *j)
{
    struct ol_sse_job *prev = NULL;
    for (struct ol_sse_job *q = g.head; q; prev = q, q = q->next) {
        if (q != j)
            continue;
        if (prev)
            prev->next = j->next;
        else
            g.head = j->next;
        if (g.tail == j)
            g.tail = prev;
        __atomic_store_n(&g.queued, g.queued - 1, __ATOMIC_RELAXED);
        return;
    }
    OL_ASSERT(!"queued job not in the queue");
}

bool ol_sse_pool_steal(struct ol_sse_job *j)
{
    pthread_mutex_lock(&g.mu);
    bool mine = j->state == JOB_QUEUED;
    if (mine) {
        unqueue(j);
        j->state = JOB_DONE;
        if (g.stop && !g.queued && !g.running)
            pthread_cond_broadcast(&g.idle);
    }
    pthread_mutex_unlock(&g.mu);
    if (mine)
        j->run(j);
    return mine;
}

bool ol_sse_pool_finish(struct ol_sse_job *j, unsigned spin_us)
{
    if (ol_sse_pool_steal(j))
        return true;
    /* Running on a pool thread: most likely about done (it started no
     * later than this thread's own part); spin a little before parking. */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == JOB_DONE)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000u +
                (uint64_t)(t.tv_nsec - t0.tv_nsec) / 1000 >= spin_us)
            break;
    }
    ol_sse_pool_wait(j);
    return false;
}

void ol_sse_pool_cancel(struct ol_sse_job *j)
{
    pthread_mutex_lock(&g.mu);
    bool now = true;
    if (j->state == JOB_QUEUED) {
        unqueue(j);
        if (g.stop && !g.queued && !g.running)
            pthread_cond_broadcast(&g.idle);
    } else if (j->state == JOB_RUNNING) {
        j->abandoned = true;
        now = false;
    }
    pthread_mutex_unlock(&g.mu);
    if (now)
        j->drop(j);
}
