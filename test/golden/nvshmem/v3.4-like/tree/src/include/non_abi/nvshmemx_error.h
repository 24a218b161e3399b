#ifndef MINI_NVSHMEMX_ERROR_H
#define MINI_NVSHMEMX_ERROR_H
#include <stdio.h>
#define NVSHMEMX_SUCCESS 0
#define NVSHMEMX_ERROR_INTERNAL 7
#define NVSHMEMX_ERROR_OUT_OF_MEMORY 9
#define NVSHMEMI_WARN_PRINT(...) fprintf(stderr, "WARN: " __VA_ARGS__)
#define NVSHMEMI_ERROR_PRINT(...) fprintf(stderr, "ERROR: " __VA_ARGS__)
#define NVSHMEMI_NZ_ERROR_JMP(status, err, label, ...) \
    do {                                                \
        if (status != 0) {                              \
            NVSHMEMI_ERROR_PRINT(__VA_ARGS__);          \
            status = err;                               \
            goto label;                                 \
        }                                               \
    } while (0)
#define NVSHMEMI_NULL_ERROR_JMP(ptr, status, err, label, ...) \
    do {                                                       \
        if (ptr == NULL) {                                     \
            NVSHMEMI_ERROR_PRINT(__VA_ARGS__);                 \
            status = err;                                      \
            goto label;                                        \
        }                                                      \
    } while (0)
#endif
