//! The `zoosim` command (its logic is the library's [`zoosim::cli`]),
//! knowing the built-in recipes.

use std::process::ExitCode;

use zoosim::scenario::registry::Registry;

fn main() -> ExitCode {
    zoosim::cli::main_with(Registry::new())
}

// The model checker clones and drops millions of small states (tree
// nodes, names, queues): glibc's malloc took about 45 % of `zoosim check
// lock --clients 5 --symmetry` (perf); with mimalloc the check ran in
// 13.6 s instead of 23.5 s on this project's 2-core machines.
//
// Counted (zoosim::memory), so that `--memory-mib` bounds what the
// process holds, measured, not what the checkers estimate.
#[global_allocator]
static ALLOC: zoosim::memory::Counting<mimalloc::MiMalloc> =
    zoosim::memory::Counting::new(mimalloc::MiMalloc);
