// zen_mpi_crash: a job in which one rank fails; the job must end with a non-zero status, never hang.
//   --mode crash : rank 1 aborts (SIGABRT) while the others wait in a zen barrier (timeout 60 s)
//   --mode exit  : rank 1 exits with status 3 without MPI_Finalize
//   --mode hang  : rank 1 stops participating (sleeps); the others time out after 1 s, print the error
//                  (naming rank 1) and call MPI_Abort
//   --mode stuck : every rank loops 16 MiB allreduces (timeout 1 s); rank 1's process is stopped
//                  (SIGSTOP) mid-loop, most likely inside the blocking MPI_Allreduce that follows the
//                  handshake: the others' watchdog ends the job (exit 75) with its message
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "zen/comm/mpi.hpp"

int main(int argc, char** argv) {
  CLI::App app{"zen MPI crash test"};
  std::string mode = "crash";
  app.add_option("--mode", mode)->check(CLI::IsMember({"crash", "exit", "hang", "stuck"}));
  CLI11_PARSE(app, argc, argv);
  zen::mpi::Environment env(&argc, &argv);
  auto c = zen::mpi::create(MPI_COMM_WORLD);
  c->set_timeout(std::chrono::milliseconds(mode == "hang" || mode == "stuck" ? 1000 : 60000));
  c->barrier();
  if (mode == "stuck") {
    std::vector<float> buf(size_t{4} << 20, 1.0f);
    if (c->rank() == 1)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::raise(SIGSTOP);
      }).detach();
    try {
      for (;;) c->allreduce(buf.data(), buf.size(), zen::DType::F32);
    } catch (const zen::Error& e) {
      std::cerr << "rank " << c->rank() << ": " << e.what() << std::endl;
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
  }
  if (c->rank() == 1) {
    if (mode == "crash") std::abort();
    if (mode == "exit") std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::seconds(600));
    return 0;
  }
  try {
    c->barrier();
  } catch (const zen::Error& e) {
    std::cerr << "rank " << c->rank() << ": " << e.what() << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
  return 0;
}
