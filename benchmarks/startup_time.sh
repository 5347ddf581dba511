#!/usr/bin/env bash
# Seconds from launching `uvicorn service.main:app` to /healthz 200, to /readyz 200, and to /readyz with no
# kernel still warming; then stops the server. Run from the repository root in the environment the README
# sets up. A fresh clone's first run includes migrating, loading the catalog and compiling the kernels.
#   bash benchmarks/startup_time.sh [PORT]
set -u
port=${1:-8000}
t0=$(date +%s.%N)
uvicorn service.main:app --port "$port" > "${TMPDIR:-/tmp}/startup_time_$port.log" 2>&1 &
pid=$!
healthz=""; readyz=""; warmed=""
for _ in $(seq 1 3000); do       # 0.1 s apart: at most 5 minutes
  now=$(date +%s.%N)
  if [ -z "$healthz" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/healthz")" = 200 ]; then
    healthz=$(echo "$now - $t0" | bc)
  fi
  if [ -n "$healthz" ]; then
    body=$(curl -s -w '\n%{http_code}' "localhost:$port/readyz")
    if [ "${body##*$'\n'}" = 200 ]; then
      [ -z "$readyz" ] && readyz=$(echo "$now - $t0" | bc)
      if echo "$body" | grep -q '"warming":\[\]'; then warmed=$(echo "$now - $t0" | bc); break; fi
    fi
  fi
  sleep 0.1
done
kill "$pid"; wait "$pid" 2>/dev/null
echo "healthz ${healthz:-never} s, readyz ${readyz:-never} s, kernels loaded ${warmed:-never} s"
