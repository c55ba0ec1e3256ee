/* The OPENVINO runtime's extras for `alma version` and the results. */
#ifndef ALMA_RUNTIMES_OPENVINO_H
#define ALMA_RUNTIMES_OPENVINO_H

#include <stddef.h>

/* OpenVINO's build number ("2026.4.1-20931-..."), loading the library if needed; NULL when it
 * cannot be loaded (alma_last_error() says why). Creates no OpenVINO threads. */
const char *alma__openvino_version(void);

/* The CPU device's FULL_DEVICE_NAME; NULL with the reason in alma_last_error(). Creates this
 * process's OpenVINO core (and so its threads): not for a process that forks conversions after. */
const char *alma__openvino_device_name(void);

#endif
