#pragma once
// In-process ranks: the rendezvous of threads that the host loopback (src/comm/loopback/) and the
// device loopback (cuda/comm/device_loopback.cpp) share. One thread per rank runs the rank's body;
// a rank that throws tells the others at once (its backend's abort), so they fail fast instead of
// waiting for the timeout; the caller gets every rank's exception, or the first one rethrown.
// Private to zen (not installed).
#include <exception>
#include <functional>
#include <vector>

namespace zen::in_process {

/// Runs body(r) on n threads, one per rank r, and joins them. When body(r) throws, its exception is
/// kept (element r of the result) and on_error(r, what) runs on that thread at once (what: the
/// exception's message, "unknown exception" for a non-std exception); then after(r), if given, runs
/// on that thread whether body failed or not. Returns each rank's exception (or null).
std::vector<std::exception_ptr> run_rank_threads(int n, const std::function<void(int)>& body,
                                                 const std::function<void(int, const char*)>& on_error,
                                                 const std::function<void(int)>& after = {});

/// Rethrows the first failing rank's exception (lowest rank), preferring an original error over the
/// RemoteError echoes it caused on other ranks. Returns when no rank failed.
void rethrow_first(const std::vector<std::exception_ptr>& errs);

}  // namespace zen::in_process
