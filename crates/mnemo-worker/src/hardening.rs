//! What the worker process does to itself at start so the agent's shell cannot reach into it.

/// Set (to `0`) when a worker re-executed itself to drop its credentials from its environment
/// block and command line: its standard input then carries them, sealed (see the `mnemo`
/// binary's `credentials` module). Never passed on to a child: an `--on-work` script's own
/// `mnemo worker run` would otherwise take its stdin for credentials.
pub const SEALED_CREDENTIALS_FD: &str = "MNEMO_SEALED_CREDENTIALS_FD";

/// Makes the worker non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): its `/proc/<pid>/` files that
/// expose memory and environment (`environ`, `mem`, `maps`, `fd/`…) belong to root, `ptrace`
/// needs `CAP_SYS_PTRACE`, and a crash writes no core file holding its keys. Inherited by no
/// child: `execve` of an ordinary program resets it.
pub fn make_non_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Whether the process is dumpable (for tests and the start-up log).
pub fn is_dumpable() -> bool {
    rustix::process::dumpable_behavior().is_ok_and(|b| b != rustix::process::DumpableBehavior::NotDumpable)
}
