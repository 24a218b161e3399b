int nvshmemi_device_lib_marker(void) { return 2; }
