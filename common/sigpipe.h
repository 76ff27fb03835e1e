// SigpipeBlock: SIGPIPE blocked for a scope, so that a write to a closed socket or pipe is an
// EPIPE error instead of the end of the process.
#pragma once

#include <signal.h>

namespace ak {

// Blocks SIGPIPE in the calling thread while it lives, and discards a SIGPIPE raised meanwhile.
// Writing to a socket or pipe whose reader has gone (hiredis to a closed connection, a write to a
// child's stdin) raises SIGPIPE, whose default action ends the process; a library must not change
// process-wide signal dispositions, so such writes in common/ run inside one of these and see
// EPIPE instead. Nests safely.
class SigpipeBlock {
 public:
  SigpipeBlock();
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace ak
