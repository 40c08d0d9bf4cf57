/* Loop, fibers, fiber I/O, cross-thread posts and completions. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/loop.h"
#include "core/msg.h"

#include "check.h"


static struct ol_loop *loop;
static int order[8], norder;

static void sleeper(void *arg)
{
    unsigned ms = (unsigned)(uintptr_t)arg;
    ol_io_sleep_ms(ms);
    order[norder++] = (int)ms;
}

static int sp[2];
static void reader(void *arg)
{
    char buf[16];
    ssize_t n = ol_io_recv(sp[0], buf, sizeof(buf), 2000);
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0);
    /* Nothing more comes: the timeout must fire. */
    uint64_t t0 = ol_now_ms();
    n = ol_io_recv(sp[0], buf, sizeof(buf), 100);
    CHECK(n == -ETIMEDOUT);
    CHECK(ol_now_ms() - t0 >= 90);
}
static void writer(void *arg)
{
    ol_io_sleep_ms(20);
    CHECK(ol_io_send(sp[1], "hello", 5, 1000) == 5);
}

static struct ol_completion compl;
static void *signaller(void *arg)
{
    usleep(20000);
    ol_completion_signal(&compl, 42);
    return NULL;
}
static void waiter(void *arg)
{
    ol_completion_init(&compl);
    pthread_t t;
    pthread_create(&t, NULL, signaller, NULL);
    CHECK(ol_completion_wait(&compl) == 42);
    pthread_join(t, NULL);
}

static int posted;
static void on_post(void *arg)
{
    posted += (int)(uintptr_t)arg;
    if (posted == 1000 * 1001 / 2)
        ol_loop_stop(loop);
}
static void *poster(void *arg)
{
    for (uintptr_t i = 1; i <= 1000; i++)
        while (ol_loop_post(loop, on_post, (void *)i) != 0)
            sched_yield();
    return NULL;
}

static void spawner(void *arg)
{
    ol_fiber_spawn(loop, sleeper, (void *)(uintptr_t)30);
    ol_fiber_spawn(loop, sleeper, (void *)(uintptr_t)10);
    ol_fiber_spawn(loop, sleeper, (void *)(uintptr_t)20);
    ol_fiber_spawn(loop, reader, NULL);
    ol_fiber_spawn(loop, writer, NULL);
    ol_fiber_spawn(loop, waiter, NULL);
}

/* ---- idle connections: the oldest are cut first, and their waits end ---- */

#define NIDLE 4
static struct ol_idle idles[NIDLE];
static int ipairs[NIDLE][2];
static int woke_eof[NIDLE];

static void idle_waiter(void *arg)
{
    int i = (int)(uintptr_t)arg;
    ol_idle_add(&idles[i], ipairs[i][0]);
    uint64_t t0 = ol_now_ms();
    /* Waiters 0 and 2 poll, 1 and 3 receive: a cut must end both kinds. */
    char b[8];
    ssize_t n = i % 2 ? ol_io_recv(ipairs[i][0], b, sizeof(b), 2000)
                      : ol_io_poll_in(ipairs[i][0], 2000);
    CHECK(n != -ETIMEDOUT && ol_now_ms() - t0 < 1500);
    if (i % 2 == 0 && n > 0)
        n = ol_io_recv(ipairs[i][0], b, sizeof(b), 100);
    woke_eof[i] = n == 0;
    ol_idle_del(&idles[i]);
    CHECK(!idles[i].listed);
    ol_idle_done(&idles[i]);
}

static void idle_cutter(void *arg)
{
    (void)arg;
    ol_io_sleep_ms(30);
    CHECK(ol_idle_count(loop) == NIDLE);
    /* Re-adding a listed entry changes nothing. */
    ol_idle_add(&idles[0], ipairs[0][0]);
    CHECK(ol_idle_count(loop) == NIDLE);
    CHECK(ol_idle_cut_oldest(loop, 2) == 2);
    CHECK(idles[0].cut && idles[1].cut && !idles[2].cut && !idles[3].cut);
    CHECK(ol_idle_count(loop) == NIDLE - 2 && ol_idle_cut_pending(loop) == 2);
    ol_io_sleep_ms(30);
    /* The cut ones woke with end-of-file and settled. */
    CHECK(woke_eof[0] && woke_eof[1] && ol_idle_cut_pending(loop) == 0);
    /* The others are still waiting; data wakes them. */
    CHECK(ol_idle_count(loop) == 2);
    CHECK(ol_io_send(ipairs[2][1], "x", 1, 100) == 1);
    CHECK(ol_io_send(ipairs[3][1], "y", 1, 100) == 1);
    ol_io_sleep_ms(30);
    CHECK(!woke_eof[2] && !woke_eof[3] && ol_idle_count(loop) == 0);
    CHECK(ol_idle_cut_oldest(loop, 5) == 0);
}

/* ---- stack trimming ---- */

static uintptr_t deep_page;

__attribute__((noinline)) static void deep(int depth)
{
    volatile char big[32 * 1024];
    /* Volatile stores, one a page: the compiler must make every one. */
    for (size_t i = 0; i < sizeof(big); i += 512)
        big[i] = (char)depth;
    deep_page = (uintptr_t)&big[0] & ~(uintptr_t)4095;
}

static bool resident(uintptr_t page)
{
    unsigned char v = 0;
    CHECK(mincore((void *)page, 4096, &v) == 0);
    return v & 1;
}

static void trimmer(void *arg)
{
    (void)arg;
    deep(7);
    CHECK(deep_page != 0 && resident(deep_page));
    ol_fiber_trim_stack();
    CHECK(!resident(deep_page));
    /* The stack still works, pages come back as they are touched. */
    deep(8);
    CHECK(resident(deep_page));
}

static void idle_spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < NIDLE; i++)
        CHECK(ol_fiber_spawn(loop, idle_waiter, (void *)(uintptr_t)i) == 0);
    CHECK(ol_fiber_spawn(loop, idle_cutter, NULL) == 0);
    CHECK(ol_fiber_spawn(loop, trimmer, NULL) == 0);
    ol_loop_stop(loop);
}

static void test_idle(void)
{
    struct ol_loop_opts o = {.id = 1, .max_fibers = 16};
    CHECK(ol_loop_create(&loop, &o) == 0);
    for (int i = 0; i < NIDLE; i++)
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, ipairs[i]) == 0);
    ol_loop_post(loop, idle_spawner, NULL);
    CHECK(ol_loop_run(loop) == 0);
    CHECK(ol_loop_nfibers(loop) == 0);
    ol_loop_destroy(loop);
    for (int i = 0; i < NIDLE; i++) {
        close(ipairs[i][0]);
        close(ipairs[i][1]);
    }
}

int main(void)
{
    struct ol_msg_ring r;
    CHECK(ol_msg_ring_init(&r, 3) == 0);
    int pushed = 0;
    while (ol_msg_push(&r, NULL, (void *)1) == 0)
        pushed++;
    CHECK(pushed == 4);
    ol_msg_fn fn;
    void *a;
    int popped = 0;
    while (ol_msg_pop(&r, &fn, &a))
        popped++;
    CHECK(popped == 4 && ol_msg_empty(&r));
    ol_msg_ring_free(&r);

    struct ol_loop_opts o = {.id = 0, .max_fibers = 16};
    CHECK(ol_loop_create(&loop, &o) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    pthread_t pt;
    pthread_create(&pt, NULL, poster, NULL);
    /* Spawning happens on the loop thread: post a message that does it. */
    ol_loop_post(loop, spawner, NULL);
    CHECK(ol_loop_run(loop) == 0);
    pthread_join(pt, NULL);
    CHECK(posted == 1000 * 1001 / 2);
    CHECK(norder == 3 && order[0] == 10 && order[1] == 20 && order[2] == 30);
    CHECK(ol_loop_nfibers(loop) == 0);
    ol_loop_destroy(loop);
    close(sp[0]);
    close(sp[1]);
    test_idle();
    printf("test_loop: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
