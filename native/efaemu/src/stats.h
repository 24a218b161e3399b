// What the emulated NIC carried: operations and bytes per path (RDM: libfabric calls; GDA: GPU-posted WQEs,
// phase 2) and per peer process, split by where the local bytes lived (host or GPU), plus the faults injected.
// Written as JSON at process exit when EFAEMU_STATS=<dir> is set, so a test can prove which path moved the
// payload (e.g. "GPU-sourced RDM write bytes = 0 with GDA on").
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "hmem.h"

namespace efaemu {

enum class Path : uint8_t { Rdm = 0, Gda = 1 };

// Initiator-side kinds (write/read/send) and target-side kinds (what peers did to us).
enum class Kind : uint8_t { Write = 0, Read, Send, Recv, RemoteWrite, RemoteRead, kCount };

struct Tally {
    uint64_t ops = 0, bytes = 0, gpu_bytes = 0, errors = 0;
};

class Stats {
public:
    // One finished operation: `status` != 0 counts an error and no bytes.
    void record(Path p, Kind k, const std::string &peer, uint64_t bytes, MemKind local, uint32_t status);
    void fault(const char *what);  // "failed", "delayed", "reordered", ...
    void note_nic(const std::string &nic);

    Tally total(Path p, Kind k) const;
    uint64_t faults(const char *what) const;

    // Renders the JSON document.
    std::string json() const;
    // Writes <dir>/efaemu-<pid>.json atomically (temp file + rename). Returns false with *why.
    bool write(const std::string &dir, std::string *why) const;

private:
    struct PerPath {
        Tally k[(int)Kind::kCount];
    };
    mutable std::mutex mu_;
    PerPath paths_[2];
    std::map<std::string, PerPath[2]> peers_;
    std::map<std::string, uint64_t> faults_;
    std::map<std::string, int> nics_;
};

Stats &stats();

// Writes the statistics once if EFAEMU_STATS is set (atexit and provider cleanup both call it).
void write_stats_at_exit();

}  // namespace efaemu
