// SPDX-License-Identifier: BSD-3-Clause
// ddp's gloo backend: see ddp_gloo.h. Every gloo call is inside a try: gloo reports a dead peer or
// a timeout by throwing, and no exception may cross into C.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

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
#include "engine/strategies/ddp_gloo.h"

namespace {

// gloo's rendezvous::Store over ctrain's TCPStore client. gloo's interface has no error codes:
// a failure throws, with ctrain's message, and ct_gloo_create turns it back into a ct_error.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(ct_tcpstore *store) : store_(store) {}

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

  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override {
    std::vector<const char *> names;
    ct_error err;
    for (const auto &k : keys)
      names.push_back(k.c_str());
    ct_error_clear(&err);
    if (ct_tcpstore_wait(store_, names.data(), static_cast<int>(names.size()), timeout.count() / 1000.0, &err))
      fail(err);
  }

  ct_error last{};

 private:
  [[noreturn]] void fail(const ct_error &err) {
    last = err;
    throw std::runtime_error(err.msg);
  }
  ct_tcpstore *store_;
};

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

struct ct_gloo {
  std::shared_ptr<gloo::rendezvous::Context> context;
  int rank;
  uint32_t tag;  // each collective its own, the same sequence on every rank
};

// gloo writes to its sockets with writev(2), not send(MSG_NOSIGNAL): a peer that died would end
// this rank with SIGPIPE before gloo could throw the error that names it (seen in t/36-ddp-srun-gloo:
// "task 0: Broken pipe" and no message). PyTorch's ranks ignore SIGPIPE (Python does at start);
// so do ctrain's from here on, unless the program installed a handler of its own.
static void ignore_sigpipe() {
  struct sigaction sa;
  if (sigaction(SIGPIPE, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

extern "C" int ct_gloo_create(ct_tcpstore *store, int rank, int size, double timeout_s, struct ct_gloo **out,
                              ct_error *err) {
  StoreAdapter adapter(store);
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
    ctx->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    ctx->connectFullMesh(adapter, dev);
    *out = new ct_gloo{ctx, rank, 0};
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

extern "C" int ct_gloo_allreduce_sum(struct ct_gloo *g, void *buf, size_t count, size_t esize, ct_error *err) {
  try {
    gloo::AllreduceOptions opts(g->context);
    if (esize == 8) {
      opts.setOutput(static_cast<double *>(buf), count);
      opts.setReduceFunction(&sum_into<double>);
    } else {
      opts.setOutput(static_cast<float *>(buf), count);
      opts.setReduceFunction(&sum_into<float>);
    }
    opts.setTag(g->tag++);
    gloo::allreduce(opts);
    return 0;
  } catch (const std::exception &e) {
    return gloo_fail(err, g->rank, "an allreduce", e.what());
  }
}

extern "C" int ct_gloo_broadcast(struct ct_gloo *g, void *buf, size_t bytes, int root, ct_error *err) {
  try {
    gloo::BroadcastOptions opts(g->context);
    opts.setOutput(static_cast<uint8_t *>(buf), bytes);
    opts.setRoot(root);
    opts.setTag(g->tag++);
    gloo::broadcast(opts);
    return 0;
  } catch (const std::exception &e) {
    return gloo_fail(err, g->rank, "a broadcast", e.what());
  }
}

// Point-to-point messages have a slot of their own, apart from every collective's (gloo's
// collectives build theirs from small prefixes and the tag): a pair's messages match in order.
static const uint8_t kP2PSlotPrefix = 0x7f;

extern "C" int ct_gloo_sendrecv(struct ct_gloo *g, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                                size_t recv_bytes, int from, ct_error *err) {
  try {
    const uint64_t slot = gloo::Slot::build(kP2PSlotPrefix, 0);
    std::unique_ptr<gloo::transport::UnboundBuffer> out, in;
    if (from >= 0) {
      in = g->context->createUnboundBuffer(recvbuf, recv_bytes);
      in->recv(from, slot);
    }
    if (to >= 0) {
      // gloo's buffer is not const, but a send only reads it.
      out = g->context->createUnboundBuffer(const_cast<void *>(sendbuf), send_bytes);
      out->send(to, slot);
    }
    if (in)
      in->waitRecv(g->context->getTimeout());
    if (out)
      out->waitSend(g->context->getTimeout());
    return 0;
  } catch (const std::exception &e) {
    return gloo_fail(err, g->rank, "a point-to-point exchange", e.what());
  }
}

extern "C" void ct_gloo_free(struct ct_gloo *g) { delete g; }
