/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain's TCPStore against PyTorch's (t/28-tcpstore-torch.t, with t/tools/tcpstore_torch.py):
 *
 *   tcpstore_peer serve           host a store on a free port; print "port N"; stop at stdin's end
 *   tcpstore_peer client HOST PORT   the client half of the exchange tcpstore_torch.py drives:
 *                                 reads what torch set, runs every query, waits for torch's "go"
 *   tcpstore_peer probe HOST PORT [SECONDS [SECRET-FILE]]   connect (proving the secret when
 *                                 given) and PING within SECONDS (default 1): prints "reached
 *                                 HOST:PORT" (exit 0) or the error (exit 1)
 *
 * Prints "ok"/"not ok" lines (the caller counts them); exit 0 when all held. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/error.h"
#include "ctrain/tcpstore.h"
#include "ctrain/util.h"

static int failed;

static void check(int cond, const char *what, const ct_error *err)
{
    printf("%s - ctrain client: %s", cond ? "ok" : "not ok", what);
    if (!cond && err && err->code)
        printf(" (%s)", err->msg);
    printf("\n");
    fflush(stdout);
    failed |= !cond;
}

/* key's value is want. */
static void check_get(ct_tcpstore *c, const char *key, const char *want)
{
    void *v = NULL;
    size_t n = 0;
    ct_error err;
    char what[256];

    ct_error_clear(&err);
    int rc = ct_tcpstore_get(c, key, &v, &n, &err);
    snprintf(what, sizeof(what), "get %s = '%s'%s%s", key, want, rc || !v ? "" : ", got ", rc || !v ? "" : (char *)v);
    check(!rc && n == strlen(want) && !memcmp(v, want, n), what, &err);
    free(v);
}

static void compare_sets(ct_tcpstore *c)
{
    void *cur = NULL;
    size_t n = 0;
    ct_error err;
    int rc;

    ct_error_clear(&err);
    rc = ct_tcpstore_compare_set(c, "cs", "v1", 2, "v3", 2, &cur, &n, &err);
    check(!rc && n == 2 && !memcmp(cur, "v3", 2), "compare_set cs v1 -> v3", &err);
    free(cur);
    /* A missing key with an expected value: not set, the expected value back (PyTorch's "lie"). */
    rc = ct_tcpstore_compare_set(c, "cs2", "x", 1, "y", 1, &cur, &n, &err);
    check(!rc && n == 1 && !memcmp(cur, "x", 1), "compare_set of a missing key gives the expected value", &err);
    free(cur);
}

static void lists(ct_tcpstore *c)
{
    const char *both[] = { "t", "ap" }, *nope[] = { "nope" }, *m[] = { "m1" };
    void *vals[1] = { NULL };
    size_t lens[1] = { 0 };
    int ready = -1, deleted = -1, rc;
    ct_error err;

    ct_error_clear(&err);
    rc = ct_tcpstore_check(c, both, 2, &ready, &err);
    check(!rc && ready == 1, "check [t, ap] ready", &err);
    rc = ct_tcpstore_check(c, nope, 1, &ready, &err);
    check(!rc && ready == 0, "check [nope] not ready", &err);
    rc = ct_tcpstore_multi_get(c, m, 1, vals, lens, &err);
    check(!rc && lens[0] == 1 && !memcmp(vals[0], "x", 1), "multi_get [m1] = [x]", &err);
    free(vals[0]);
    rc = ct_tcpstore_delete(c, "m1", &deleted, &err);
    check(!rc && deleted == 1, "delete m1", &err);
    rc = ct_tcpstore_delete(c, "m1", &deleted, &err);
    check(!rc && deleted == 0, "delete m1 again: nothing deleted", &err);
}

static int client(const char *host, int port)
{
    ct_tcpstore *c = NULL;
    ct_error err;
    int64_t v = 0;
    int rc;
    const char *never[] = { "never" }, *go[] = { "go" };

    ct_error_clear(&err);
    rc = ct_tcpstore_connect(host, port, NULL, 1, 30, &c, &err);
    check(!rc, "connect, VALIDATE and PING", &err);
    if (rc)
        return 1;
    check_get(c, "t", "from torch");
    rc = ct_tcpstore_add(c, "n", 10, &v, &err);
    check(!rc && v == 15, "add n 10 = 15 (torch added 5)", &err);
    compare_sets(c);
    rc = ct_tcpstore_append(c, "ap", "c", 1, &err);
    check(!rc, "append ap c", &err);
    check_get(c, "ap", "abc");
    lists(c);
    double t0 = ct_time_now();
    rc = ct_tcpstore_wait(c, never, 1, 0.3, &err);
    check(rc == CT_ETIMEOUT && ct_time_now() - t0 < 5, "wait [never] 0.3 s times out (CANCEL_WAIT)", &err);
    check(ct_tcpstore_ping(c, &err) == 0, "the connection works after the cancelled wait", &err);
    rc = ct_tcpstore_set(c, "c", "from ctrain", 11, &err);
    check(!rc, "set c", &err);
    /* torch sets "go" once it has read "c": a WAIT woken by the other implementation. */
    rc = ct_tcpstore_wait(c, go, 1, 30, &err);
    check(!rc, "wait [go] woken by torch's set", &err);
    rc = ct_tcpstore_set(c, "late", "1", 1, &err);
    check(!rc, "set late", &err);
    ct_tcpstore_close(c);
    return failed;
}

static int serve(void)
{
    ct_tcpstore_server *srv = NULL;
    ct_error err;
    char buf[64];

    ct_error_clear(&err);
    if (ct_tcpstore_server_start(0, 0, &srv, &err)) {
        ct_error_print(stderr, &err);
        return 1;
    }
    printf("port %d\n", ct_tcpstore_server_port(srv));
    fflush(stdout);
    while (read(0, buf, sizeof(buf)) > 0)
        ;
    ct_tcpstore_server_stop(srv);
    return 0;
}

/* Whether a store answers at host:port (t/29: the addresses rank 0's store listens on). */
static int probe(const char *host, int port, double seconds, const char *secret_file)
{
    ct_tcpstore *c = NULL;
    ct_error err;
    char secret[4096];
    size_t len = 0;

    if (secret_file) {
        FILE *f = fopen(secret_file, "rb");
        if (!f) {
            perror(secret_file);
            return 2;
        }
        len = fread(secret, 1, sizeof(secret), f);
        fclose(f);
    }
    ct_error_clear(&err);
    if (ct_tcpstore_connect_auth(host, port, NULL, 0, seconds, secret_file ? secret : NULL, len, &c, &err)) {
        printf("unreached %s:%d: %s\n", host, port, err.msg);
        return 1;
    }
    printf("reached %s\n", ct_tcpstore_address(c));
    ct_tcpstore_close(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "serve"))
        return serve();
    if (argc == 4 && !strcmp(argv[1], "client"))
        return client(argv[2], atoi(argv[3]));
    if (argc >= 4 && argc <= 6 && !strcmp(argv[1], "probe"))
        return probe(argv[2], atoi(argv[3]), argc >= 5 ? atof(argv[4]) : 1, argc == 6 ? argv[5] : NULL);
    fprintf(stderr, "ctrain: usage: tcpstore_peer serve | tcpstore_peer client HOST PORT | tcpstore_peer probe HOST "
            "PORT [SECONDS [SECRET-FILE]]\n");
    return 2;
}
