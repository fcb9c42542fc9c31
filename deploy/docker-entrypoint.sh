#!/bin/sh
# The container image's entrypoint (/opt/glossa/bin/glossa-entrypoint): runs glossa-server on
# 0.0.0.0:50051 (gRPC), 0.0.0.0:9464 (metrics) and 0.0.0.0:8080 (HTTP/JSON and the page),
# configured by arguments or environment:
#   GLOSSA_MODELS="name=/models/x.glossa,other=/models/y.glossa"   the models (--model), unless
#                  the arguments or GLOSSA_FLAGS name --model; unset: the bundled demo model
#   GLOSSA_FLAGS="--workers=2 --threads=1 --shutdown_timeout=30s"   more glossa-server flags,
#                  split on spaces (so no spaces inside a value)
# Arguments come last and win (for a flag given twice the last value counts; --model adds up):
#   docker run glossa --listen 0.0.0.0:6000 --threads 2
# An argument that is not a flag runs that command instead: docker run glossa glossa-translate ...
set -eu

case "${1:-}" in
  "" | -*) ;;
  *) exec "$@" ;;
esac

models=${GLOSSA_MODELS:-}
# shellcheck disable=SC2086  # GLOSSA_FLAGS is split on spaces on purpose
for arg in ${GLOSSA_FLAGS:-} "$@"; do
  case "$arg" in
    --model | --model=* | -model | -model=*) models= ;;
  esac
done

# exec: glossa-server is PID 1 and gets the SIGTERM of `docker stop` / Kubernetes (it drains
# in-flight requests for up to --shutdown_timeout, then exits 0).
# shellcheck disable=SC2086
exec /opt/glossa/bin/glossa-server --listen 0.0.0.0:50051 --metrics_listen 0.0.0.0:9464 \
  --http_listen 0.0.0.0:8080 \
  ${models:+--model "$models"} ${GLOSSA_FLAGS:-} "$@"
