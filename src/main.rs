//! The `zoosim` command (its logic is the library's [`zoosim::cli`]),
//! knowing the built-in recipes.

use std::process::ExitCode;

use zoosim::scenario::registry::Registry;

fn main() -> ExitCode {
    zoosim::cli::main_with(Registry::new())
}
