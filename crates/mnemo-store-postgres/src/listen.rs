//! Replicas hear each other: every write that live views care about sends a `NOTIFY` on the
//! store's channel when it commits, and one connection per store `LISTEN`s and turns what it
//! hears into [`Signal`]s. The connection reconnects by itself; after reconnecting, and every
//! [`RECHECK_EVERY`] besides, it sends [`Signal::Resync`], so a lost notification only delays.

use std::time::Duration;

use futures::StreamExt;
use mnemo_api::{Backoff, MemoryStoreId, SessionId};
use mnemo_store::Signal;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How often listeners re-check everything even when they heard nothing.
pub const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// Signals buffered for slow subscribers (a subscriber that falls behind resyncs).
const CAPACITY: usize = 4096;

/// The channel name of a store in `schema`: replicas of one deployment share it.
pub(crate) fn channel(schema: &str) -> String {
    format!("mnemo.{schema}")
}

/// A signal as a notification payload.
pub(crate) fn encode(signal: &Signal) -> String {
    match signal {
        Signal::Events { session, first, last } => format!("e {session} {first} {last}"),
        Signal::Memory { store, seq } => format!("m {store} {seq}"),
        Signal::Work => "w".to_owned(),
        Signal::Credentials => "c".to_owned(),
        Signal::Resync => "r".to_owned(),
    }
}

/// A notification payload as a signal; anything unknown (a newer replica's signal) resyncs.
pub(crate) fn decode(payload: &str) -> Signal {
    let mut words = payload.split(' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("e"), Some(session), Some(first), Some(last)) => {
            match (session.parse::<SessionId>(), first.parse(), last.parse()) {
                (Ok(session), Ok(first), Ok(last)) => Signal::Events { session, first, last },
                _ => Signal::Resync,
            }
        }
        (Some("m"), Some(store), Some(seq), None) => match (store.parse::<MemoryStoreId>(), seq.parse()) {
            (Ok(store), Ok(seq)) => Signal::Memory { store, seq },
            _ => Signal::Resync,
        },
        (Some("w"), None, ..) => Signal::Work,
        (Some("c"), None, ..) => Signal::Credentials,
        _ => Signal::Resync,
    }
}

/// The sending half, shared by the store's clones.
pub(crate) fn channel_pair() -> broadcast::Sender<Signal> {
    broadcast::channel(CAPACITY).0
}

/// Listens on `channel` until aborted, reconnecting after any failure.
pub(crate) async fn run(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    channel: String,
    out: broadcast::Sender<Signal>,
) {
    // 100 ms after a clean end; after failures in a row 200 ms, 400 ms, … up to 5 s.
    const RECONNECT: Backoff = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(5));
    let mut failures = 0_u32;
    loop {
        match listen_once(&config, &tls, &channel, &out).await {
            Ok(()) => failures = 0,
            Err(e) => {
                tracing::warn!(error = %e, "lost the database's notifications; reconnecting");
                failures = failures.saturating_add(1);
            }
        }
        let _ = out.send(Signal::Resync);
        tokio::time::sleep(RECONNECT.delay(failures)).await;
    }
}

async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    channel: &str,
    out: &broadcast::Sender<Signal>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(Ok(n.payload().to_owned())).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    let quoted = channel.replace('"', "\"\"");
    let listening = client.batch_execute(&format!("LISTEN \"{quoted}\"")).await;
    if let Err(e) = listening {
        driver.abort();
        return Err(e);
    }
    // Whatever was sent while nobody listened is lost: re-check now.
    let _ = out.send(Signal::Resync);
    let mut tick = tokio::time::interval(RECHECK_EVERY);
    tick.tick().await;
    let result = loop {
        tokio::select! {
            message = rx.recv() => match message {
                Some(Ok(payload)) => { let _ = out.send(decode(&payload)); }
                Some(Err(e)) => break Err(e),
                None => break Ok(()),
            },
            _ = tick.tick() => {
                // Also proves the connection is alive: a dead or silent one fails here and
                // reconnects.
                match tokio::time::timeout(RECHECK_EVERY * 5, client.simple_query("")).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => break Err(e),
                    Err(_) => break Ok(()),
                }
                let _ = out.send(Signal::Resync);
            }
        }
    };
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_survive_their_payloads() {
        let session: SessionId = SessionId::generate();
        let memory = Signal::Memory { store: MemoryStoreId::generate(), seq: 42 };
        for signal in
            [Signal::Events { session, first: 3, last: 7 }, memory, Signal::Work, Signal::Credentials, Signal::Resync]
        {
            assert_eq!(decode(&encode(&signal)), signal);
        }
        assert_eq!(decode("x something new"), Signal::Resync, "an unknown signal re-checks everything");
        assert_eq!(decode("e not-an-id 1 2"), Signal::Resync);
        assert_eq!(decode("m not-an-id 1"), Signal::Resync);
        assert!(
            encode(&Signal::Events { session: SessionId::generate(), first: i64::MAX, last: i64::MAX }).len() < 8000
        );
    }
}
