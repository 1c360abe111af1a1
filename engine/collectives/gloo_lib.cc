// SPDX-License-Identifier: BSD-3-Clause
// ddp's gloo backend: see ddp_gloo.h. Every gloo call is inside a try: gloo reports a dead peer or
// a timeout by throwing, and no exception may cross into C.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

// ctrain's headers are C: their functions have C linkage.
extern "C" {
#include "ctrain/error.h"
#include "ctrain/tcpstore.h"
}
#include "engine/collectives/gloo_lib.h"

namespace {

// gloo's rendezvous::Store over ctrain's TCPStore client. gloo's interface has no error codes:
// a failure throws, with ctrain's message, and ct_gloo_create turns it back into a ct_error.
// Every wait takes the collective timeout whatever gloo passes: gloo passes its context's, which
// ct_gloo_create shortens while the pairs connect (see kConnectWaitFactor).
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(ct_tcpstore *store, double timeout_s) : store_(store), timeout_s_(timeout_s) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    ct_error err;
    ct_error_clear(&err);
    if (ct_tcpstore_set(store_, key.c_str(), data.data(), data.size(), &err))
      fail(err);
  }

  std::vector<char> get(const std::string &key) override {
    ct_error err;
    void *v = nullptr;
    size_t n = 0;
    ct_error_clear(&err);
    if (ct_tcpstore_get(store_, key.c_str(), &v, &n, &err))
      fail(err);
    std::vector<char> out(static_cast<char *>(v), static_cast<char *>(v) + n);
    free(v);
    return out;
  }

  void wait(const std::vector<std::string> &keys) override { wait(keys, std::chrono::milliseconds(0)); }

  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override {
    std::vector<const char *> names;
    ct_error err;
    for (const auto &k : keys)
      names.push_back(k.c_str());
    ct_error_clear(&err);
    if (ct_tcpstore_wait(store_, names.data(), static_cast<int>(names.size()), timeout_s_, &err))
      fail(err);
  }

  ct_error last{};

 private:
  [[noreturn]] void fail(const ct_error &err) {
    last = err;
    throw std::runtime_error(err.msg);
  }
  ct_tcpstore *store_;
  double timeout_s_;
};

// gloo's tcp pairs wait five times their timeout for their first connection (Pair::waitUntil in
// gloo/transport/tcp/pair.h, Debian 12's and 13's gloo alike), so a rank that died after it
// published its address held the others in connectFullMesh for 5 x --collective-timeout (25 min
// at the default). The pairs are made with the timeout divided by this; the collectives take the
// context's, set back once they are connected.
constexpr int kConnectWaitFactor = 5;

// The reduction, ours rather than gloo::sum<T>: Debian 13's gloo counts its loop in an int.
template <typename T>
void sum_into(void *out, const void *a, const void *b, size_t n) {
  T *o = static_cast<T *>(out);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++)
    o[i] = x[i] + y[i];
}

// gloo says a peer went silent past the context's timeout ("Timed out waiting ...", "Read
// timeout", "Application timeout caused pair closure"): CT_ETIMEOUT, which ddp answers by finding
// the missing ranks through the store; anything else (a reset connection) is CT_ECOMM.
bool timed_out(const char *why) {
  return strstr(why, "Timed out") || strcasestr(why, "timeout");
}

int gloo_fail(ct_error *err, int rank, const char *what, const char *why) {
  int rc = ct_error_set(err, timed_out(why) ? CT_ETIMEOUT : CT_ECOMM, "gloo", "ddp (gloo): rank %d: %s failed: %s",
                        rank, what, why);
  ct_error_hint(err, "a peer rank probably died or lost its connection, or --collective-timeout passed; see "
                "the other ranks' messages");
  return rc;
}

}  // namespace

// One collective, as queued: what runs it and what a failure calls it.
struct Job {
  long ticket;
  const char *what;
  std::function<void()> run;
};

struct ct_gloo {
  std::shared_ptr<gloo::rendezvous::Context> context;
  int rank;
  uint32_t tag = 0;  // each collective its own, the same sequence on every rank
  long started = 0;  // tickets handed out (main thread only)
  // Shared with the worker, under mu: the queue, how far it ran, the first failure.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  long done = 0;
  long failed = 0;
  ct_error error{};
  bool stop = false;
  std::thread worker;  // not joinable: unthreaded, each collective runs in its start
};

namespace {

// Run one collective; a failure (gloo throws) becomes the context's first error, and the ones after
// it are not run: gloo's pairs are closed after a failure, and the ranks' sequences have parted.
void run_job(ct_gloo *g, Job &job) {
  ct_error err;
  int rc = 0;
  bool skip;

  ct_error_clear(&err);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    skip = g->failed != 0;
  }
  if (!skip) {
    try {
      job.run();
    } catch (const std::exception &e) {
      rc = gloo_fail(&err, g->rank, job.what, e.what());
    } catch (...) {
      rc = gloo_fail(&err, g->rank, job.what, "an unknown exception");
    }
  }
  std::lock_guard<std::mutex> lock(g->mu);
  if (rc != 0 && !g->failed) {
    g->failed = job.ticket;
    g->error = err;
  }
  g->done = job.ticket;
  g->cv.notify_all();
}

void worker_main(ct_gloo *g) {
  // Its name in /proc/PID/task/*/comm and in a debugger's thread list.
  pthread_setname_np(pthread_self(), "ctrain-gloo");
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(g->mu);
      g->cv.wait(lock, [g] { return g->stop || !g->queue.empty(); });
      if (g->queue.empty())
        return;  // stopped, and nothing left to run
      job = std::move(g->queue.front());
      g->queue.pop_front();
    }
    run_job(g, job);
  }
}

// Hand a collective to the worker (or run it now, unthreaded); its ticket. Out of memory for the
// queue fails the collective as gloo would: the wait for it reports the error.
long submit(ct_gloo *g, const char *what, std::function<void()> run) {
  Job job{++g->started, what, std::move(run)};

  if (!g->worker.joinable()) {
    run_job(g, job);
    return job.ticket;
  }
  std::lock_guard<std::mutex> lock(g->mu);
  try {
    g->queue.push_back(std::move(job));
  } catch (...) {
    if (!g->failed) {
      g->failed = g->started;
      gloo_fail(&g->error, g->rank, what, "out of memory queueing it");
    }
  }
  g->cv.notify_all();
  return g->started;
}

// The worker runs with every signal blocked (its mask is set before it starts): the stop and dump
// signals are the main thread's (engine/trainer/stop.c), and one delivered here would interrupt gloo.
void start_worker(ct_gloo *g) {
  sigset_t all, old;

  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    g->worker = std::thread(worker_main, g);
  } catch (...) {
    // No thread (a system out of them): each collective runs in its start, as unthreaded.
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

// gloo writes to its sockets with writev(2), not send(MSG_NOSIGNAL): a peer that died would end
// this rank with SIGPIPE before gloo could throw the error that names it (seen in t/36-ddp-srun-gloo:
// "task 0: Broken pipe" and no message). PyTorch's ranks ignore SIGPIPE (Python does at start);
// so do ctrain's from here on, unless the program installed a handler of its own.
static void ignore_sigpipe() {
  struct sigaction sa;
  if (sigaction(SIGPIPE, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

extern "C" int ct_gloo_create(ct_tcpstore *store, int rank, int size, double timeout_s, int threaded,
                              struct ct_gloo **out, ct_error *err) {
  StoreAdapter adapter(store, timeout_s);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  *out = nullptr;
  ignore_sigpipe();
  try {
    gloo::transport::tcp::attr attr;
    char local[64];
    // GLOO_SOCKET_IFNAME, as PyTorch's gloo backend reads it: which interface the pairs use. Else
    // the address this rank reaches the store by, which the others reach it by too; gloo's own
    // default, the address the host's name resolves to, fails where the name resolves to nothing
    // (a container, a chroot without the host in /etc/hosts) or to a loopback address on a
    // multi-host job.
    if (const char *ifname = getenv("GLOO_SOCKET_IFNAME"))
      attr.iface = ifname;
    else if (ct_tcpstore_local_address(store, local, sizeof(local)) == 0)
      attr.hostname = local;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // 0 is gloo's "no timeout" too; a positive one stays positive.
    ctx->setTimeout(timeout.count() > 0 ? std::max(timeout / kConnectWaitFactor, std::chrono::milliseconds(1))
                                        : timeout);
    ctx->connectFullMesh(adapter, dev);
    ctx->setTimeout(timeout);
    auto *g = new ct_gloo;
    g->context = ctx;
    g->rank = rank;
    if (threaded)
      start_worker(g);
    *out = g;
    return 0;
  } catch (const std::exception &e) {
    if (adapter.last.code) {
      // The store's own error names the address, the rank and what to check.
      if (err)
        *err = adapter.last;
      return adapter.last.code;
    }
    return gloo_fail(err, rank, "joining the ranks (gloo's connectFullMesh)", e.what());
  } catch (...) {
    return gloo_fail(err, rank, "joining the ranks", "an unknown exception");
  }
}

extern "C" long ct_gloo_allreduce_start(struct ct_gloo *g, void *buf, size_t count, size_t esize) {
  auto ctx = g->context;
  uint32_t tag = g->tag++;

  return submit(g, "an allreduce", [ctx, buf, count, esize, tag] {
    gloo::AllreduceOptions opts(ctx);
    if (esize == 8) {
      opts.setOutput(static_cast<double *>(buf), count);
      opts.setReduceFunction(&sum_into<double>);
    } else {
      opts.setOutput(static_cast<float *>(buf), count);
      opts.setReduceFunction(&sum_into<float>);
    }
    opts.setTag(tag);
    gloo::allreduce(opts);
  });
}

// Messages between pairs of ranks, all posted then all waited for, on the worker in order with the
// collectives. The slot is this exchange's own (kExchangeSlotPrefix and its tag): its messages match
// no other exchange's, and a pair's messages within it match in order.
static const uint8_t kExchangeSlotPrefix = 0x7e;

extern "C" long ct_gloo_exchange_start(struct ct_gloo *g, const struct ct_gloo_msg *sends, int nsends,
                                       const struct ct_gloo_msg *recvs, int nrecvs) {
  auto ctx = g->context;
  std::vector<ct_gloo_msg> out(sends, sends + nsends), in(recvs, recvs + nrecvs);
  uint32_t tag = g->tag++;

  return submit(g, "a reduce-scatter", [ctx, out, in, tag] {
    const uint64_t slot = gloo::Slot::build(kExchangeSlotPrefix, tag);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rbufs, sbufs;

    for (const auto &m : in) {
      rbufs.push_back(ctx->createUnboundBuffer(m.buf, m.bytes));
      rbufs.back()->recv(m.peer, slot);
    }
    for (const auto &m : out) {
      sbufs.push_back(ctx->createUnboundBuffer(m.buf, m.bytes));
      sbufs.back()->send(m.peer, slot);
    }
    for (auto &r : rbufs)
      r->waitRecv(ctx->getTimeout());
    for (auto &w : sbufs)
      w->waitSend(ctx->getTimeout());
  });
}

extern "C" long ct_gloo_allgatherv_start(struct ct_gloo *g, void *buf, const size_t *counts, size_t esize) {
  auto ctx = g->context;
  std::vector<size_t> elements(counts, counts + ctx->size);
  uint32_t tag = g->tag++;

  return submit(g, "an all-gather", [ctx, buf, elements, esize, tag] {
    gloo::AllgathervOptions opts(ctx);
    // No input: this rank's part is in place in the output, as gloo's allgatherv allows.
    if (esize == 8) {
      opts.setOutput(static_cast<double *>(buf), elements);
    } else if (esize == 4) {
      opts.setOutput(static_cast<float *>(buf), elements);
    } else {
      std::vector<size_t> bytes(elements);
      for (auto &b : bytes)
        b *= esize;
      opts.setOutput(static_cast<uint8_t *>(buf), bytes);
    }
    opts.setTag(tag);
    gloo::allgatherv(opts);
  });
}

// The reduce-scatter as pairs of messages (not gloo's ReduceScatterHalvingDoubling: see
// gloo_lib.h): each peer's block of send goes to it, the peers' blocks of this rank's arrive in a
// scratch row each, then recv is their sum in rank order (the same order whatever arrived first).
static const uint8_t kReduceScatterSlotPrefix = 0x7d;

template <typename T>
void sum_rows(void *recv, const void *own, const std::vector<char> &rows, int rank, int size, size_t count) {
  T *out = static_cast<T *>(recv);
  for (int q = 0; q < size; q++) {
    const T *part = q == rank ? static_cast<const T *>(own)
                              : reinterpret_cast<const T *>(rows.data()) + static_cast<size_t>(q < rank ? q : q - 1) * count;
    for (size_t i = 0; i < count; i++)
      out[i] = q == 0 ? part[i] : out[i] + part[i];
  }
}

extern "C" long ct_gloo_reduce_scatter_start(struct ct_gloo *g, const void *send, void *recv, size_t count,
                                             size_t esize) {
  auto ctx = g->context;
  uint32_t tag = g->tag++;

  return submit(g, "a reduce-scatter", [ctx, send, recv, count, esize, tag] {
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
    const int rank = ctx->rank, size = ctx->size;
    const size_t block = count * esize;
    std::vector<char> rows(static_cast<size_t>(size > 1 ? size - 1 : 1) * block + 1);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rbufs, sbufs;
    char *base = static_cast<char *>(const_cast<void *>(send));

    for (int q = 0; q < size && block > 0; q++) {
      if (q == rank)
        continue;
      rbufs.push_back(ctx->createUnboundBuffer(rows.data() + static_cast<size_t>(q < rank ? q : q - 1) * block, block));
      rbufs.back()->recv(q, slot);
      sbufs.push_back(ctx->createUnboundBuffer(base + static_cast<size_t>(q) * block, block));
      sbufs.back()->send(q, slot);
    }
    for (auto &r : rbufs)
      r->waitRecv(ctx->getTimeout());
    for (auto &w : sbufs)
      w->waitSend(ctx->getTimeout());
    const void *own = base + static_cast<size_t>(rank) * block;
    if (esize == 8)
      sum_rows<double>(recv, own, rows, rank, size, count);
    else
      sum_rows<float>(recv, own, rows, rank, size, count);
  });
}

extern "C" long ct_gloo_broadcast_start(struct ct_gloo *g, void *buf, size_t bytes, int root) {
  auto ctx = g->context;
  uint32_t tag = g->tag++;

  return submit(g, "a broadcast", [ctx, buf, bytes, root, tag] {
    gloo::BroadcastOptions opts(ctx);
    opts.setOutput(static_cast<uint8_t *>(buf), bytes);
    opts.setRoot(root);
    opts.setTag(tag);
    gloo::broadcast(opts);
  });
}

extern "C" int ct_gloo_wait(struct ct_gloo *g, long ticket, long *failed, ct_error *err) {
  std::unique_lock<std::mutex> lock(g->mu);

  // Every collective fails within the context's timeout, so this wait ends.
  g->cv.wait(lock, [g, ticket] { return g->done >= ticket || (g->failed && g->failed <= ticket); });
  if (!g->failed || g->failed > ticket)
    return 0;
  if (failed)
    *failed = g->failed;
  if (err)
    *err = g->error;
  return g->error.code;
}

extern "C" long ct_gloo_last(const struct ct_gloo *g) { return g->started; }

extern "C" int ct_gloo_allreduce_sum(struct ct_gloo *g, void *buf, size_t count, size_t esize, ct_error *err) {
  return ct_gloo_wait(g, ct_gloo_allreduce_start(g, buf, count, esize), nullptr, err);
}

extern "C" int ct_gloo_broadcast(struct ct_gloo *g, void *buf, size_t bytes, int root, ct_error *err) {
  return ct_gloo_wait(g, ct_gloo_broadcast_start(g, buf, bytes, root), nullptr, err);
}

// Point-to-point messages have a slot of their own, apart from every collective's (gloo's
// collectives build theirs from small prefixes and the tag): a pair's messages match in order.
static const uint8_t kP2PSlotPrefix = 0x7f;

// Run on the context's worker, in order with the collectives, as everything of the context.
extern "C" int ct_gloo_sendrecv(struct ct_gloo *g, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                                size_t recv_bytes, int from, ct_error *err) {
  auto ctx = g->context;
  long ticket = submit(g, "a point-to-point exchange", [ctx, sendbuf, send_bytes, to, recvbuf, recv_bytes, from] {
    const uint64_t slot = gloo::Slot::build(kP2PSlotPrefix, 0);
    std::unique_ptr<gloo::transport::UnboundBuffer> out, in;
    if (from >= 0) {
      in = ctx->createUnboundBuffer(recvbuf, recv_bytes);
      in->recv(from, slot);
    }
    if (to >= 0) {
      // gloo's buffer is not const, but a send only reads it.
      out = ctx->createUnboundBuffer(const_cast<void *>(sendbuf), send_bytes);
      out->send(to, slot);
    }
    if (in)
      in->waitRecv(ctx->getTimeout());
    if (out)
      out->waitSend(ctx->getTimeout());
  });
  return ct_gloo_wait(g, ticket, nullptr, err);
}

extern "C" void ct_gloo_free(struct ct_gloo *g) {
  if (!g)
    return;
  if (g->worker.joinable()) {
    {
      std::lock_guard<std::mutex> lock(g->mu);
      g->stop = true;
      g->cv.notify_all();
    }
    g->worker.join();
  }
  delete g;
}
