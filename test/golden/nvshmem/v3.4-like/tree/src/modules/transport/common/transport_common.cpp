#include "transport_common.h"
int nvshmemt_common_ok(void) { return 1; }
