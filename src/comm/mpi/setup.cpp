// MPI backend: setup and the serial gate. MPI's initialization (Environment), the process-wide gate
// that keeps zen's MPI calls to one thread at a time below MPI_THREAD_MULTIPLE (with the hand-over of
// calls and abort messages to the thread inside), and the creation and destruction of a communicator
// (non-blocking MPI_Comm_idup and host/nonce agreement; the bounded drain at destruction).
// The class and its state: mpi_comm.hpp.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "mpi_comm.hpp"

#include "zen/detail/mix64.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <link.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace zen::mpi {

namespace {
// Under LeakSanitizer (sanitizer builds only; docs/reliability.md, "Leak checking"): Open MPI
// allocates at MPI_Init_thread / MPI_Finalize and never frees (component tables, hwloc's topology,
// strings), and most of it from plugins it unloads at MPI_Finalize, whose frames LSan then cannot
// name, so no suppression file can match them. Two narrow exemptions:
//  - allocations made by the calling thread inside MPI_Init_thread and MPI_Finalize are not reported
//    (zen runs no code inside those calls);
//  - after MPI_Init_thread every loaded Open MPI plugin (and PMIx) is marked RTLD_NODELETE, so its
//    frames stay nameable at exit and tests/reliability/lsan.supp can match allocations made by
//    Open MPI's own threads (the PMIx event thread) by library name.
// zen's own allocations, on any thread, stay leak-checked.
struct ThirdPartyAllocations {
#if defined(__SANITIZE_ADDRESS__)
  ThirdPartyAllocations() { __lsan_disable(); }
  ~ThirdPartyAllocations() { __lsan_enable(); }
#endif
};

void pin_mpi_plugins() {
#if defined(__SANITIZE_ADDRESS__)
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        const char* name = info->dlpi_name;
        if (name && (std::strstr(name, "/openmpi/") || std::strstr(name, "libpmix"))) {
          // NOLOAD: only an object already loaded; NODELETE: never unloaded, even by dlclose.
          if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(h);
        }
        return 0;
      },
      nullptr);
#endif
}
}  // namespace

Environment::Environment(int* argc, char*** argv, int required) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    // SERIALIZED (default): non-blocking zen calls run their MPI calls on the communicator's
    // progress thread. MULTIPLE: several communicators used from several threads at once.
    {
      [[maybe_unused]] ThirdPartyAllocations exempt;
      MPI_Init_thread(argc, argv, required, &provided_);
    }
    pin_mpi_plugins();
    owns_ = true;
  } else {
    MPI_Query_thread(&provided_);
  }
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown MPI thread level";
  }
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) {
    [[maybe_unused]] ThirdPartyAllocations exempt;
    MPI_Finalize();
  }
}

namespace impl {

SerialGate& SerialGate::get() {
  static SerialGate g;
  return g;
}

bool SerialGate::try_enter() {
  std::lock_guard<std::mutex> lk(m_);
  if (depth_ > 0 && owner_ != std::this_thread::get_id()) return false;
  owner_ = std::this_thread::get_id();
  ++depth_;
  return true;
}

void SerialGate::enter() {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [&] { return depth_ == 0 || owner_ == std::this_thread::get_id(); });
  owner_ = std::this_thread::get_id();
  ++depth_;
}

// The holder's last leave runs what other threads handed over before it lets the gate go.
void SerialGate::leave() noexcept {
  for (;;) {
    std::vector<std::function<void()>> todo;
    {
      std::lock_guard<std::mutex> lk(m_);
      if (depth_ == 1 && !posted_.empty()) {
        todo.swap(posted_);
        has_posted_.store(false, std::memory_order_relaxed);
      } else {
        if (--depth_ == 0) owner_ = std::thread::id();
        break;
      }
    }
    run_all(todo);
  }
  cv_.notify_all();
}

// Run `f` inside the gate without waiting for another thread: at once when the gate is free (or
// this thread holds it), else handed to the thread that holds it (run_posted, leave).
void SerialGate::run_or_post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lk(m_);
    if (depth_ > 0 && owner_ != std::this_thread::get_id()) {
      posted_.push_back(std::move(f));
      has_posted_.store(true, std::memory_order_release);
      return;
    }
    owner_ = std::this_thread::get_id();
    ++depth_;
  }
  std::vector<std::function<void()>> one;
  one.push_back(std::move(f));
  run_all(one);
  leave();
}

// Run `f` inside the gate and return when it has run: by this thread when the gate is free (or this
// thread holds it), else by the holder (run_posted, leave) while this thread waits for that. Never
// waits for the holder's operation to end, only for its next sweep; f's exception comes back here.
void SerialGate::call(const std::function<void()>& f) {
  struct Done {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr err;
  };
  auto d = std::make_shared<Done>();
  run_or_post([d, &f] {
    try {
      f();
    } catch (...) {
      d->err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(d->m);
      d->done = true;
    }
    d->cv.notify_all();
  });
  std::unique_lock<std::mutex> lk(d->m);
  d->cv.wait(lk, [&] { return d->done; });
  if (d->err) std::rethrow_exception(d->err);
}

// The holder, while it waits for peers: run what other threads handed over.
void SerialGate::run_posted() {
  if (!has_posted_.load(std::memory_order_acquire)) return;
  std::vector<std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> lk(m_);
    if (owner_ != std::this_thread::get_id()) return;
    todo.swap(posted_);
    has_posted_.store(false, std::memory_order_relaxed);
  }
  run_all(todo);
}

void SerialGate::run_all(std::vector<std::function<void()>>& todo) noexcept {
  for (auto& f : todo) {
    try {
      f();
    } catch (...) {  // an abort message that cannot be sent: the peers time out instead
    }
  }
}

namespace {

std::string serial_gate_message(int level) {
  return std::string("another thread is inside an MPI call of zen (a communicator used by another thread right "
                     "now) and MPI was initialized with ") +
         thread_level_name(level) +
         ", which allows one thread at a time; use communicators from several threads at once only under "
         "MPI_THREAD_MULTIPLE (zen::mpi::Environment(&argc, &argv, MPI_THREAD_MULTIPLE), or MPI_Init_thread), or drive "
         "several plans of one communicator from several threads with CallOrder::Agreed";
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Query_thread(&level_);
  serial_ = level_ < MPI_THREAD_MULTIPLE;
  // Below MULTIPLE every MPI call here enters the gate alone and the waits for the peers are made
  // outside it (SerialGate): setups on several threads at once complete in any order.
  const Gated gated{serial_};
  MPI_Request rq = MPI_REQUEST_NULL;
  int parent_rank = -1;
  gated([&] {
    MPI_Comm_rank(comm, &parent_rank);
    setup_check(MPI_Comm_idup(comm, &comm_, &rq), parent_rank, "MPI_Comm_idup");
  });
  setup_wait(rq, parent_rank, "MPI_Comm_idup");
  // Ranks on this host (by processor name, as Open MPI's MPI_COMM_TYPE_SHARED groups them) and a
  // nonce agreed at creation (rank 0's clock and address), in one non-blocking allgather.
  uint64_t mine[2] = {0, 0};
  std::vector<uint64_t> all;
  gated([&] {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char host[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    mine[0] = fnv1a(host, static_cast<size_t>(std::max(0, len)));  // the name's hash
    mine[1] = mix64(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                    reinterpret_cast<uintptr_t>(this) ^ (static_cast<uint64_t>(getpid()) << 32));
    all.assign(2 * static_cast<size_t>(size_), 0);
    setup_check(MPI_Iallgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm_, &rq), rank_, "MPI_Iallgather");
  });
  setup_wait(rq, rank_, "MPI_Iallgather");
  node_ranks_ = 0;
  for (int p = 0; p < size_; ++p) node_ranks_ += all[2 * static_cast<size_t>(p)] == mine[0];
  // Every rank agrees: if any two ranks are on different hosts, no rank has all ranks on its host.
  multi_host_ = node_ranks_ < size_;
  nonce_ = all[1];
  schedule_ = multi_host_ ? Schedule::Auto : Schedule::Native;
  if (const char* e = std::getenv("ZEN_MPI_SCHEDULE")) {  // same value on every rank (launcher environment)
    const std::string v(e);
    if (v == "native") schedule_ = Schedule::Native;
    else if (v == "pairwise") schedule_ = Schedule::Pairwise;
    else if (v == "auto") schedule_ = multi_host_ ? Schedule::Auto : Schedule::Native;
  }
  closed_.assign(static_cast<size_t>(size_), 0);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  oversubscribed_ = node_ranks_ > std::max<long>(1, online);
  if (const char* y = std::getenv("OMPI_MCA_mpi_yield_when_idle")) oversubscribed_ = oversubscribed_ || std::atoi(y) > 0;
  if (const char* y = std::getenv("ZEN_MPI_YIELD")) oversubscribed_ = std::atoi(y) > 0;  // force (experiments)
  stage_ = std::make_shared<Stage>();
  abort_in_.resize(sizeof(AbortHeader) + kAbortBytes);
  gated([&] {
    MPI_Irecv(abort_in_.data(), static_cast<int>(abort_in_.size()), MPI_BYTE, MPI_ANY_SOURCE, kAbortTag, comm_, &abort_rq_);
  });
}

// Setup: an MPI error, and the wait for a setup request (outside the gate between tests; bounded by
// the timeout: a peer that never creates this communicator is an error, not a hang).
void MpiComm::setup_check(int rc, int r, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  ZEN_THROW(Result::SystemError, "rank " + std::to_string(r) + " mpi create: " + what + " failed: " + std::string(msg, static_cast<size_t>(len)));
}

void MpiComm::setup_wait(MPI_Request& rq, int r, const char* what) {
  const Gated gated{serial_};
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    int flag = 0, rc = MPI_SUCCESS;
    gated([&] { rc = MPI_Test(&rq, &flag, MPI_STATUS_IGNORE); });
    setup_check(rc, r, what);
    if (flag) return;
    if (std::chrono::steady_clock::now() > deadline)
      // The request stays with MPI (a collective request cannot be cancelled or freed).
      ZEN_THROW(Result::Timeout, "rank " + std::to_string(r) + " mpi create: " + what + " did not complete within " +
                                     std::to_string(timeout_.count()) +
                                     " ms: not every rank of the parent communicator is creating this communicator");
    sched_yield();
  }
}

void MpiComm::check_async_support() const {
  const int provided = level_;  // queried at creation: MPI_Query_thread here could run beside MPI
  if (provided < MPI_THREAD_SERIALIZED)
    ZEN_THROW(Result::Unsupported,
              "rank " + std::to_string(rank_) + " mpi non-blocking sparse allreduce: MPI was initialized with " +
                  (provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED") +
                  "; non-blocking calls run MPI on zen's progress thread and need MPI_Init_thread with "
                  "MPI_THREAD_SERIALIZED (MPI_THREAD_MULTIPLE if the caller itself calls MPI while one is pending)");
}

// Below MULTIPLE each MPI call enters the gate alone and the waits for peers are made outside it
// (SerialGate, "a destruction"; tests/reliability/test_concurrency_mpi.cpp, Crossed).
MpiComm::~MpiComm() {
  finish_calls();  // non-blocking calls still queued run (or fail) before the backend goes
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    leak_everything();
    return;
  }
  const Gated gated{serial_};
  // Buffered sends: give them the timeout to complete, as a later call would.
  bool sending = !pending_.empty();
  if (!failed()) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (sending && std::chrono::steady_clock::now() < deadline) {
      gated([&] {
        progress_sends();
        sending = !pending_.empty();
      });
      if (sending && (serial_ || oversubscribed_)) sched_yield();
    }
  }
  bool outstanding = false;
  gated([&] {
    progress_sends();
    if (abort_rq_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&abort_rq_);
      int flag = 0, cancelled = 0;
      MPI_Status st;
      for (int i = 0; i < 1000 && !flag; ++i) MPI_Test(&abort_rq_, &flag, &st);
      if (!flag) {
        orphans_.push_back(abort_rq_);
      } else if (MPI_Test_cancelled(&st, &cancelled) == MPI_SUCCESS && !cancelled) {
        // The receive matched a message before the cancel: a peer's "closing" (counted as such by
        // close_control_channels, which would otherwise wait for it to its bound) or a stale one.
        AbortHeader h{};
        std::memcpy(&h, abort_in_.data(), sizeof h);
        if (h.nonce == nonce_ && h.missing == kClosing && h.rank >= 0 && h.rank < size_) closed_[static_cast<size_t>(h.rank)] = 1;
      }
      abort_rq_ = MPI_REQUEST_NULL;
    }
    outstanding = !pending_.empty();
    for (auto& r : orphans_) {
      int flag = 0;
      if (r != MPI_REQUEST_NULL) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      outstanding = outstanding || !flag;
    }
  });
  // MPI still holds requests on our buffers (or on failed plans' workspaces): keep all of that
  // memory alive for the rest of the process rather than let MPI write into freed memory. The
  // communicator itself is still freed (MPI defers its deallocation until those requests end), so
  // every rank frees it alike and later communicator creations agree on context ids.
  if (outstanding) leak_everything();
  close_control_channels();
  gated([&] {
    if (!outstanding)
      for (auto& op : ops16_)
        if (op != MPI_OP_NULL) MPI_Op_free(&op);
    MPI_Comm_free(&comm_);
  });
}

// Threads: below MPI_THREAD_MULTIPLE an operation runs only if no other thread is inside zen's MPI
// calls (SerialGate); otherwise it fails here, before any MPI call.
// A refusal is sent to the peers at once (an abort message; they may be waiting in this operation
// already), whatever the caller does next: a plan's setup refused on one rank fails on every rank.
void MpiComm::begin_op() {
  if (!serial_ || SerialGate::get().try_enter()) return;
  try {
    fail(Result::Unsupported, -1, serial_gate_message(level_));
  } catch (const Error& e) {
    do_abort(e.what());
    throw;
  }
}

void MpiComm::end_op() noexcept {
  if (serial_) SerialGate::get().leave();
}

}  // namespace impl

std::unique_ptr<Communicator> create(MPI_Comm comm) { return std::make_unique<impl::MpiComm>(comm); }

}  // namespace zen::mpi
