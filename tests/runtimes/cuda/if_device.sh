#!/bin/sh
# if_device.sh ALMA COMMAND...: runs COMMAND when alma's CUDA runtime is usable here, else reports
# SKIP with the reason `alma list` gives (exit 77, CTest's SKIP_RETURN_CODE for the gpu tests).
alma="$1"
shift
why=$("$alma" list 2>&1 | grep -E '^  CUDA ' | sed -n 's/.* -- unavailable: //p')
if [ -n "$why" ]; then
  echo "SKIP: CUDA unavailable: $why"
  exit 77
fi
exec "$@"
