//! Where objects of the catalog start and how they end: a new session's status, what
//! archiving a session does to it, and how an agent's versions are numbered.

use mnemo_api::{Event, EventPoster, SessionStatus};

use crate::StoreError;

/// The status a new session starts in: idle, waiting for its first input.
pub const NEW_SESSION_STATUS: SessionStatus = SessionStatus::Idle;

/// What archiving a live session does: it terminates. The session takes [`Self::status`], its
/// log records [`Self::event`] posted by [`Self::poster`], its work items not yet stopped are
/// force-stopped, and the webhooks of the event and of the archive are sent. Archiving an
/// archived session does nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Termination {
    pub status: SessionStatus,
    pub event: Event,
    pub poster: EventPoster,
    /// Whether the session's work is force-stopped (not asked to stop gracefully): nobody is
    /// left to answer it.
    pub force_stop_work: bool,
}

/// What archiving a session does; `None` when it is archived already.
pub fn archive_session(already_archived: bool) -> Option<Termination> {
    (!already_archived).then_some(Termination {
        status: SessionStatus::Terminated,
        event: Event::StatusTerminated,
        poster: EventPoster::ServerActor,
        force_stop_work: true,
    })
}

/// The version an agent is created at.
pub const FIRST_AGENT_VERSION: u32 = 1;

/// The version after `latest`: each change that changes something adds one.
pub fn next_agent_version(latest: u32) -> Result<u32, StoreError> {
    latest.checked_add(1).ok_or_else(|| StoreError::Invalid(format!("the agent has reached its last version {latest}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_session_is_idle() {
        assert_eq!(NEW_SESSION_STATUS, SessionStatus::Idle);
        assert_eq!(NEW_SESSION_STATUS.as_str(), "idle");
    }

    #[test]
    fn archiving_a_session_terminates_it_once() {
        let cases = [
            (
                false,
                Some(Termination {
                    status: SessionStatus::Terminated,
                    event: Event::StatusTerminated,
                    poster: EventPoster::ServerActor,
                    force_stop_work: true,
                }),
            ),
            (true, None),
        ];
        for (already, does) in cases {
            assert_eq!(archive_session(already), does, "already archived: {already}");
        }
        assert_eq!(Event::StatusTerminated.kind(), "session.status_terminated");
    }

    #[test]
    fn agent_versions_count_from_one_by_one() {
        assert_eq!(FIRST_AGENT_VERSION, 1);
        let cases = [(1, Some(2)), (2, Some(3)), (41, Some(42)), (u32::MAX - 1, Some(u32::MAX)), (u32::MAX, None)];
        for (latest, next) in cases {
            assert_eq!(next_agent_version(latest).ok(), next, "after {latest}");
        }
    }
}
