/* The ORT runtime's environment, for `alma version`. */
#ifndef ALMA_ORT_H
#define ALMA_ORT_H

#include <stddef.h>

/* "onnxruntime 1.32.0, numpy 1.24.2, Python 3.11 in /path/to/venv" (0), or why it cannot be loaded
 * (-1); starts the interpreter if needed. */
int alma__ort_version(char *buf, size_t n);

#endif
