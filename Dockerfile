# The backend container: a static (musl) binary on an empty base image, run as a non-root user.
#   docker build -t payments-backend .
#   docker run -e DATABASE_URL=postgres://… -e BANK_URL=http://bank:8081 \
#     -e AUTH_JWT_SECRET=… -v ./policy.yaml:/etc/payments/policy.yaml:ro -p 8080:8080 payments-backend
# deploy/verify-container.sh builds the runtime stage below from a locally built binary (this
# machine has no registry for base images) and runs it.

FROM rust:1.95-bookworm AS build
# musl-gcc: the embedded SQLite store (sqlx's bundled SQLite) compiles C for the static binary.
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
ENV CC_x86_64_unknown_linux_musl=musl-gcc
WORKDIR /src
COPY . .
RUN cargo build --locked --profile server --target x86_64-unknown-linux-musl -p backend --bins \
 && mkdir -p /out \
 && cp target/x86_64-unknown-linux-musl/server/backend target/x86_64-unknown-linux-musl/server/bank-simulator /out/

# Runtime: nothing but the binaries and the default policy (mount your own over it).
FROM scratch
COPY --from=build /out/backend /out/bank-simulator /usr/local/bin/
COPY policy.yaml /etc/payments/policy.yaml
ENV POLICY_FILE=/etc/payments/policy.yaml \
    LISTEN_ADDR=0.0.0.0:8080 \
    RUST_LOG=info
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/backend", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/backend"]
CMD ["serve"]
