// A state dump that makes a hang explain itself (test-only diagnostics of the emulator; off unless asked for).
//
//   EFAEMU_DUMP_AFTER_S=N   dump N s after the emulator started, then every N s (a hang shows what moves and what
//                           does not between two dumps)
//   EFAEMU_DUMP_SIGNAL=1    SIGUSR1 dumps at once (the previous SIGUSR1 handler, if any, is chained)
//
// A dump goes to stderr (every line prefixed "efaemu-dump[<pid>]") and, with EFAEMU_STATS=<dir>, to
// <dir>/efaemu-<pid>-dump<N>.txt. It holds: the engine thread's current activity and for how long (a CUDA copy
// that never returns shows here), operations in flight and held completions, per peer the wire backlog, per NIC
// the inbox; per RDM endpoint the posted receives, unexpected messages, what the application posted and what
// completed, its CQs (entries not yet read, when the application last read) and counters; per GDA queue pair the
// doorbell, WQEs fetched, staged past the doorbell, in flight, held by the completion scheduler and CQEs written;
// softgdr's faults, write-backs and any access stuck in its fault handler; every thread's state, CPU time and
// native backtrace; and findings: the lines above that point at a stall.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace efaemu {
namespace dump {

// What the engine thread is doing now (set by the engine, read by a dump taken while it is stuck).
enum class Act : uint32_t {
    Idle,
    Sleeping,
    Submissions,
    Inbox,
    Targets,
    Pump,
    Sources,
    Completions,
    Checks,
    CudaDtoH,
    CudaHtoD,
    CudaSync,
};
const char *act_name(Act a);
void set_activity(Act a);
// Sets an activity for a scope (the CUDA copies), restoring the previous one.
class Scope {
public:
    explicit Scope(Act a);
    ~Scope();

private:
    uint32_t prev_;
    uint64_t prev_since_;
};

// Starts the dump thread once when EFAEMU_DUMP_AFTER_S or EFAEMU_DUMP_SIGNAL asks for it (any thread).
void start();
// Ends the dumps before the engine is torn down (process exit, provider cleanup): waits for a dump in progress
// and lets no new one begin, so the dump thread never reads the engine while it is being destroyed.
void stop();

// Builds a dump now (the dump thread and tests call it). reason: what triggered it.
std::string build(const char *reason);

// "1.234 s" since t (monotonic ns); "-" for 0.
std::string age(uint64_t t_ns, uint64_t now_ns);

}  // namespace dump
}  // namespace efaemu
