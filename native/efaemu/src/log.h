// Logging through libfabric's own logger (FI_LOG_LEVEL=warn|info|debug, FI_LOG_PROV=efa), as providers do.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <cerrno>

namespace efaemu {
extern struct fi_provider g_prov;
}

// Messages are written without the trailing newline; the macros add it.
#define EFA_WARN(subsys, fmt, ...) FI_WARN(&efaemu::g_prov, subsys, fmt "\n", ##__VA_ARGS__)
#define EFA_INFO(subsys, fmt, ...) FI_INFO(&efaemu::g_prov, subsys, fmt "\n", ##__VA_ARGS__)
