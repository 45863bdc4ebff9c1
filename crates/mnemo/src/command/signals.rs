//! SIGINT/SIGTERM as an async stream: the first asks for a clean stop, a second (once armed)
//! exits at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Exit status for an abort by a second signal (128 + SIGINT).
const ABORT_STATUS: i32 = 130;

pub(crate) struct Signals {
    int: Signal,
    term: Signal,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signals").finish_non_exhaustive()
    }
}

impl Signals {
    pub(crate) fn install() -> std::io::Result<Self> {
        Ok(Self { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
    }

    /// Waits for the next SIGINT or SIGTERM.
    pub(crate) async fn next(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {},
            _ = self.term.recv() => {},
        }
    }

    /// From now on, the next signal ends the process immediately.
    pub(crate) fn abort_on_next(mut self) {
        tokio::spawn(async move {
            self.next().await;
            eprintln!("second signal: aborting without finishing the teardown");
            std::process::exit(ABORT_STATUS);
        });
    }
}
