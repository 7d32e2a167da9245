# The aether-edge image: a static-enough release binary on distroless, non-root.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p aether-edge \
 && cp target/release/aether-edge /aether-edge

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /aether-edge /usr/local/bin/aether-edge
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/aether-edge"]
