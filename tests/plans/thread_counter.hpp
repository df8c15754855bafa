#pragma once
// Counts the threads this process creates: thread_counter.cpp interposes pthread_create (every
// std::thread, the plans' pool workers included, goes through it), so a test can show that a call
// creates no thread, whatever thread ids the system reuses. Link thread_counter.cpp into the test
// binary (once).
#include <cstdint>

namespace zen::test {
/// Threads created by this process so far (successful pthread_create calls, each counted before the
/// new thread starts).
uint64_t threads_created();
}  // namespace zen::test
