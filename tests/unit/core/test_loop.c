/* Loop, fibers, fiber I/O, cross-thread posts and completions. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    printf("test_loop: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
