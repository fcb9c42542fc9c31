# Glossa server image: build with the same setup script as the README and CI, then keep only
# the binaries, their shared libraries, the demo model and model_tools.
#   docker build -t glossa .   (podman: podman build --format docker -t glossa .)
#   docker run -p 50051:50051 -p 9464:9464 glossa
FROM debian:12-slim AS build
WORKDIR /src
COPY deploy/setup.sh deploy/setup.sh
RUN GLOSSA_SETUP_MINIMAL=1 bash deploy/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=OFF \
 && cmake --build build -j "$(nproc)"

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgrpc++1.51 libgrpc29 libprotobuf32 libdnnl2 \
      libabsl20220623 libgomp1 ocl-icd-libopencl1 zlib1g libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 python3 python3-numpy \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /opt/glossa glossa
COPY --from=build /src/build/glossa-server /src/build/glossa-client /src/build/glossa-translate \
     /src/build/glossa-batch \
     /opt/glossa/bin/
COPY --from=build /src/models/ /opt/glossa/models/
COPY --from=build /src/model_tools/ /opt/glossa/model_tools/
ENV PATH=/opt/glossa/bin:$PATH OMP_WAIT_POLICY=passive
USER glossa
EXPOSE 50051 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD ["glossa-client", "--server", "127.0.0.1:50051", "--health", "--timeout", "2s"]
ENTRYPOINT ["glossa-server", "--listen", "0.0.0.0:50051", "--metrics_listen", "0.0.0.0:9464"]
