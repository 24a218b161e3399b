/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * What GDA tells the application: the one-line status (why GDA is off, or what it runs on), whether it is active
 * and on how many rails, and whether its signals may be used (the GPUDirect RDMA write ordering start-up agreed
 * on). Compiled whether or not libfabric has the GDA ops: the status is how a build without them says so. */
#include "efa_gda_internal.h"

#include <stdarg.h>
#include <stdio.h>

namespace efa_gda {

char g_status[1024] = "EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1 on every PE)";
bool g_active = false;
int g_rails = 0;
bool g_signals_ordered = false;
char g_signals_why[400] = "";
bool g_delivered_once = false;
char g_delivered_once_why[400] = "";

void set_status(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_status, sizeof g_status, fmt, ap);
    va_end(ap);
}

#if defined(FI_EFA_GDA_OPS)
std::string left_out(const Gda &s) {
    std::string o;
    for (size_t i = 0; i < s.offered.size(); i++) {
        if (s.offered[i].why.empty()) continue;
        o += (o.empty() ? "" : "; ") + std::string("rail ") + std::to_string(i) + " (" + s.offered[i].name + ") left out: " +
             s.offered[i].why;
    }
    return o;
}
#endif

}  // namespace efa_gda

using namespace efa_gda;

int nvshmemt_efa_gda_active(void) { return g_active ? 1 : 0; }

extern "C" const char *nvshmemx_efa_gda_status(void) { return g_status; }
extern "C" int nvshmemx_efa_gda_is_active(void) { return g_active ? 1 : 0; }
extern "C" int nvshmemx_efa_gda_rails(void) { return g_active ? g_rails : 0; }

extern "C" int nvshmemx_efa_gda_signals_ordered(const char **why) {
    if (!g_active) {
        if (why) *why = g_status;
        return 0;
    }
    if (why) *why = g_signals_why;
    return g_signals_ordered ? 1 : 0;
}

extern "C" int nvshmemx_efa_gda_writes_delivered_once(const char **why) {
    if (!g_active) {
        if (why) *why = g_status;
        return 0;
    }
    if (why) *why = g_delivered_once_why;
    return g_delivered_once ? 1 : 0;
}
