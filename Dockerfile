# syntax=docker/dockerfile:1
# The membench image: one binary that is both the operator (`membench operator`) and the
# benchmark client the operator starts next to each engine (`membench load`).
#
# Multi-arch (the benchmarks run on Graviton/arm64 as much as on x86):
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     -t ghcr.io/membench/membench:0.1.0 --push .
# Each platform compiles natively (under QEMU when the builder's architecture differs, which is
# slow; a native arm64 builder node is much faster). Not built in membench's own CI, which has no
# container runtime: see docs/install.md.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The registry cache is architecture-independent, so platforms may share it (one at a time).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    cargo build --release --locked -p membench --bin membench \
 && install -D -m 0755 target/release/membench /out/membench

# glibc and libgcc only (the build stage is Debian 12 too), no shell, non-root by default.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/membench /usr/local/bin/membench
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/membench"]
