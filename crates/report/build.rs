//! Compiles proto/aether/edge/v1/fleet.proto with protox (no protoc needed).

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("aether/edge/v1/fleet.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root]).expect("compiling fleet.proto");
    tonic_prost_build::configure()
        // Sorted maps: a Gateway's parts sort together ("gateway|object"), so the
        // status gate reads them as one range; and the wire order is the
        // same for the same report.
        .btree_map(".aether.edge.v1.AckReport")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .expect("generating the fleet report service");
}
