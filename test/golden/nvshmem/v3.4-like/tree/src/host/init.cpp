int nvshmemi_host_init_count(void) { return 1; }
