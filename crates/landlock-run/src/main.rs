//! The `landlock-run` binary (a target of stockade-cli, see Cargo.toml):
//! everything lives in the library, whose README is the reference.

fn main() {
    landlock_run::main()
}
