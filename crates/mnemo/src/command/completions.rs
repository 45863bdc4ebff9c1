//! `mnemo completions SHELL`: the shell completion script, generated from the clap definitions
//! so it always matches the binary.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Debug, Args)]
pub(crate) struct Completions {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

impl Completions {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let mut cmd = super::Cli::command();
        let mut stdout = std::io::stdout().lock();
        clap_complete::generate(self.shell, &mut cmd, "mnemo", &mut stdout);
        Ok(())
    }
}
