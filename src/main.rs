//! The `gtrace` executable: parse the command line and run the driver.

fn main() {
    std::process::exit(gtrace::driver::main());
}
