//! Compiles proto/echo.proto (the live tests' gRPC backend) with protox.

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let file = root.join("echo.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root]).expect("compiling echo.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .expect("generating the echo service");
}
