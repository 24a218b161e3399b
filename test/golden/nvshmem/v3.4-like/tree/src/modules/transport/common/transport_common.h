#ifndef MINI_TRANSPORT_COMMON_H
#define MINI_TRANSPORT_COMMON_H
int nvshmemt_common_ok(void);
#endif
