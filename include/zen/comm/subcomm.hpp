#pragma once
// Sub-communicator: a communicator over some ranks of a host parent communicator, whose operations
// run over the parent's point-to-point calls (implemented in src/comm/subcomm.cpp).
#include <memory>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen {

/// A communicator over the parent ranks `members` (member k = rank k of the result; the calling rank
/// must be one of them). Every operation is built on the parent's sendrecv/send/recv with parent tag
/// `tag` (in [0, 16383]; give concurrently used sub-communicators sharing a rank pair distinct tags),
/// so it works for any host backend (loopback, MPI). Messages between a pair match in issue order;
/// the sub-communicator's own point-to-point tags are checked for range only. allreduce gathers all
/// contributions and reduces them in rank order (bitwise identical on every member). Host memory only.
/// The parent must outlive the result; traffic is counted on both.
std::unique_ptr<Communicator> make_subcommunicator(Communicator& parent, std::vector<int> members, int tag);

}  // namespace zen
