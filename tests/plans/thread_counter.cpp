// pthread_create interposed by the test executable (it precedes libc in symbol lookup, also for the
// calls std::thread makes from libstdc++): counts every thread the process creates, then forwards
// to the next definition (libc's, or a sanitizer's interceptor).
#include "thread_counter.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {
std::atomic<uint64_t> g_created{0};
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
}  // namespace

uint64_t zen::test::threads_created() { return g_created.load(); }

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  static const CreateFn next = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (!next) {
    std::fprintf(stderr, "thread_counter: dlsym(RTLD_NEXT, pthread_create) failed\n");
    std::abort();
  }
  // Counted before the thread exists: the new thread may run (and read the count) before the
  // creating thread returns from `next`, so counting afterwards could land in a later window.
  g_created.fetch_add(1);
  const int rc = next(t, attr, fn, arg);
  if (rc != 0) g_created.fetch_sub(1);
  return rc;
}
