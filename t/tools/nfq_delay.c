/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfq_delay: hold every packet of an NFQUEUE for a fixed time, then let it go on (NF_ACCEPT) —
 * the delay half of scripts/slurm-cluster's `link NODE delay MS` on kernels built without tc
 * netem (sch_netem). The script runs it inside the node's network namespace, where iptables
 * rules send the node's eth0 traffic, both ways, to queue QUEUE:
 *
 *   nfq_delay QUEUE MS
 *
 * Packets leave in the order they arrived (FIFO), each MS milliseconds after it arrived: the
 * holder keeps (packet id, due time) in a ring and, when the oldest is due, accepts with one
 * batch verdict every packet up to the newest due one. Packet ids of a queue grow by one, so the
 * batch verdict also lets go of a packet whose message the holder never read (socket buffer
 * overrun): nothing stays held for ever. Only the packet's metadata is copied to the holder.
 *
 * The queue is large (QUEUE_MAXLEN) and fail-open: when it is full the kernel lets packets
 * through undelayed rather than dropping them. SIGTERM or SIGINT: every held packet is let go at
 * once and the holder exits 0 (`link ... clear` and `stop` end it so). If it dies otherwise, the
 * kernel drops the packets it held (TCP sends them again) and the rules' --queue-bypass lets later
 * packets through undelayed. It prints "ready" on stdout once the queue is bound, and a line on
 * stderr for every error; exit status: 0 ended by a signal, 1 the queue failed, 2 bad usage.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

#define QUEUE_MAXLEN 100000u          /* packets the kernel may hold for this queue */
#define RCVBUF (32u * 1024 * 1024)     /* the netlink socket's buffer: a burst of metadata */

struct held {
    uint32_t id;
    int64_t due_ns;
};

/* The packets held, oldest first: a growable ring. */
struct ring {
    struct held *v;
    size_t cap, head, len;
};

static volatile sig_atomic_t stop_requested;
static int64_t delay_ns;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int ring_push(struct ring *r, uint32_t id, int64_t due_ns)
{
    if (r->len == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4096, i;
        struct held *v = malloc(cap * sizeof(*v));
        if (!v)
            return -1;
        for (i = 0; i < r->len; i++)
            v[i] = r->v[(r->head + i) % r->cap];
        free(r->v);
        r->v = v;
        r->cap = cap;
        r->head = 0;
    }
    r->v[(r->head + r->len) % r->cap] = (struct held){ id, due_ns };
    r->len++;
    return 0;
}

/* Let go of every packet due by LIMIT_NS (all of them for INT64_MAX) with one batch verdict. */
static void release_due(struct nfq_q_handle *qh, struct ring *r, int64_t limit_ns)
{
    uint32_t last = 0;
    int any = 0;

    while (r->len > 0 && r->v[r->head].due_ns <= limit_ns) {
        last = r->v[r->head].id;
        any = 1;
        r->head = (r->head + 1) % r->cap;
        r->len--;
    }
    if (any && nfq_set_verdict_batch(qh, last, NF_ACCEPT) < 0)
        fprintf(stderr, "nfq_delay: verdict for packets up to %u failed: %s\n", last, strerror(errno));
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data)
{
    struct ring *r = data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    uint32_t id;

    (void)msg;
    if (!ph)
        return 0;
    id = ntohl(ph->packet_id);
    if (ring_push(r, id, now_ns() + delay_ns) < 0) {
        /* Out of memory: this one goes on undelayed rather than being held for ever. */
        nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    return 0;
}

/* poll's timeout: until the oldest held packet is due (-1: nothing held). */
static int wait_ms(const struct ring *r)
{
    int64_t left;

    if (r->len == 0)
        return -1;
    left = r->v[r->head].due_ns - now_ns();
    if (left <= 0)
        return 0;
    return (int)((left + 999999) / 1000000);
}

static int parse_u(const char *s, unsigned long max, unsigned long *out)
{
    char *end;

    errno = 0;
    *out = strtoul(s, &end, 10);
    return (*s && !*end && !errno && *out <= max) ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct nfq_handle *h = NULL;
    struct nfq_q_handle *qh = NULL;
    struct ring held = { 0 };
    struct sigaction sa;
    unsigned long queue, ms;
    char buf[65536] __attribute__((aligned));
    int fd, rv = 1;

    if (argc != 3 || parse_u(argv[1], 65535, &queue) < 0 || parse_u(argv[2], 600000, &ms) < 0) {
        fprintf(stderr, "usage: nfq_delay QUEUE MS (QUEUE 0-65535, MS 0-600000)\n");
        return 2;
    }
    delay_ns = (int64_t)ms * 1000000;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;   /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    h = nfq_open();
    if (!h) {
        fprintf(stderr, "nfq_delay: cannot open netfilter queue netlink: %s\n", strerror(errno));
        goto out;
    }
    qh = nfq_create_queue(h, (uint16_t)queue, on_packet, &held);
    if (!qh) {
        fprintf(stderr, "nfq_delay: cannot bind queue %lu (another holder on it?): %s\n", queue, strerror(errno));
        goto out;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, QUEUE_MAXLEN) < 0) {
        fprintf(stderr, "nfq_delay: cannot configure queue %lu: %s\n", queue, strerror(errno));
        goto out;
    }
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN) < 0)
        fprintf(stderr, "nfq_delay: queue %lu is not fail-open (kernel too old?): a full queue drops\n", queue);
    nfnl_rcvbufsiz(nfq_nfnlh(h), RCVBUF);
    fd = nfq_fd(h);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    printf("ready\n");
    fflush(stdout);

    while (!stop_requested) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll(&p, 1, wait_ms(&held));

        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "nfq_delay: poll: %s\n", strerror(errno));
            goto out;
        }
        if (n > 0) {
            for (;;) {
                ssize_t got = recv(fd, buf, sizeof(buf), 0);
                if (got > 0) {
                    nfq_handle_packet(h, buf, (int)got);
                    continue;
                }
                if (got < 0 && errno == ENOBUFS) {
                    /* Messages lost: their packets go with the next batch verdict (ids). */
                    continue;
                }
                if (got < 0 && (errno == EAGAIN || errno == EINTR))
                    break;
                fprintf(stderr, "nfq_delay: recv: %s\n", got < 0 ? strerror(errno) : "netlink closed");
                goto out;
            }
        }
        release_due(qh, &held, now_ns());
    }
    rv = 0;
out:
    if (qh) {
        release_due(qh, &held, INT64_MAX);   /* let go of everything still held */
        nfq_destroy_queue(qh);
    }
    if (h)
        nfq_close(h);
    free(held.v);
    return rv;
}
