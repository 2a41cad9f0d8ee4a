# syntax=docker/dockerfile:1
# The membench image: one binary that is both the operator (`membench operator`) and the
# benchmark client the operator starts next to each engine (`membench load`).
#
# Multi-arch (the benchmarks run on Graviton/arm64 as much as on x86):
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     -t ghcr.io/membench/membench:0.1.0 --push .
# Each platform compiles natively (under QEMU when the builder's architecture differs, which is
# slow; a native arm64 builder node is much faster).
#
# hack/build-image.sh builds the same image without a container runtime (membench's CI does, into
# target/image/membench-oci.tar). Both lay the file system out with hack/image-rootfs.sh, so
# both images have the same paths, user and entrypoint: see docs/src/how-to/image.md.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The registry cache is architecture-independent, so platforms may share it (one at a time).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    cargo build --release --locked -p membench --bin membench \
 && hack/image-rootfs.sh target/release/membench /rootfs

# Only what image-rootfs.sh laid out: membench, the Debian 12 glibc and libgcc it links (from the
# build stage), user 65532, no shell.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/membench"]
