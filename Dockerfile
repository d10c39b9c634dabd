# The backend container: a static (musl) binary on an empty base image, run as a non-root user.
# It holds the backend binary and the default policy, nothing else (no bank simulator: that is a
# test tool, tools/bank-simulator).
#   docker build -t payments-backend .
#   docker run -e DATABASE_URL=postgres://… -e BANK_URL=http://bank:8081 \
#     -e AUTH_JWT_SECRET=… -v ./policy.yaml:/etc/payments/policy.yaml:ro -p 8080:8080 payments-backend
#
# Where the binary comes from, chosen with --build-arg BINARY_FROM=…:
#   build     (the default) compiled in the `build` stage below, from the source in the context;
#   prebuilt  a static musl binary already built in this checkout with
#             `cargo build --locked --profile server --target x86_64-unknown-linux-musl -p backend`,
#             for machines that cannot pull the `rust` base image (deploy/verify-container.sh).
# Stages the chosen one does not need are skipped, so `prebuilt` pulls no base image at all.
ARG BINARY_FROM=build

FROM rust:1.95-bookworm AS build
# musl-gcc: the embedded SQLite store (sqlx's bundled SQLite) compiles C for the static binary.
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
ENV CC_x86_64_unknown_linux_musl=musl-gcc
WORKDIR /src
COPY . .
RUN cargo build --locked --profile server --target x86_64-unknown-linux-musl -p backend --bin backend \
 && mkdir -p /out \
 && cp target/x86_64-unknown-linux-musl/server/backend /out/

# The same binary built outside (.dockerignore lets exactly this file of target/ through).
FROM scratch AS prebuilt
COPY target/x86_64-unknown-linux-musl/server/backend /out/backend

FROM ${BINARY_FROM} AS binary

# Runtime: nothing but the backend binary and the default policy (mount your own over it).
FROM scratch
COPY --from=binary /out/backend /usr/local/bin/backend
COPY policy.yaml /etc/payments/policy.yaml
ENV POLICY_FILE=/etc/payments/policy.yaml \
    LISTEN_ADDR=0.0.0.0:8080 \
    RUST_LOG=info
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/backend", "healthcheck"]
# SIGTERM drains: /readyz replies 503 at once, requests are served for SHUTDOWN_GRACE_SECONDS (5)
# while balancers take the replica out, then in-flight requests get SHUTDOWN_DEADLINE_SECONDS
# (15) to finish. Give the orchestrator more than the two together before it sends SIGKILL:
# `docker stop -t 25`, `podman stop -t 25`, Kubernetes `terminationGracePeriodSeconds: 25`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/backend"]
CMD ["serve"]
