//! `stockade-winrun`: all of its logic is `stockade_windows::runner`, where
//! it is unit-tested; this file only hands it the process arguments.

fn main() {
    std::process::exit(stockade_windows::runner::main(std::env::args_os()));
}
