//! Compiles pprof's profile.proto (proto/) into prost's Rust types for `--pprof`, with
//! protox (a protobuf compiler in Rust: no protoc needed) and prost-build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let files = protox::compile(["profile.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(files)?;
    Ok(())
}
