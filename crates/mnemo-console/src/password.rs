//! People's passwords: hashed with argon2id (RFC 9106), kept only as the PHC string
//! (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`), which names its own parameters so they can be raised
//! later without invalidating stored hashes.
//!
//! Argon2id is memory-hard: each guess costs an attacker who stole the database the same memory
//! and time it costs us, which is what makes a 12-character password hold. The parameters are
//! the `argon2` crate's defaults, OWASP's recommendation (19 MiB, 2 passes, 1 lane). Hashing
//! blocks for tens of milliseconds, so it runs on the blocking pool.
//!
//! Signing in verifies against the stored hash, or — for an email that is no person's, or a
//! person without a password — against a fixed dummy hash of the same cost, so a refusal takes
//! as long either way and its timing does not tell which addresses belong to someone.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordVerifier};
use argon2::password_hash::{PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use mnemo_api::Secret;

fn argon2() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::default())
}

/// Why a password could not be hashed (the machine, never the password).
#[derive(Debug, thiserror::Error)]
#[error("could not hash the password: {0}")]
pub(crate) struct HashFailed(String);

/// The PHC string of `password`'s argon2id hash, with a fresh random salt.
pub(crate) async fn hash(password: Secret) -> Result<String, HashFailed> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        argon2()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| HashFailed(e.to_string()))
    })
    .await
    .map_err(|e| HashFailed(e.to_string()))?
}

/// An argon2id hash with the parameters of every real one, whose digest is no password's (it is
/// the SHA-256 of a sentence): verifying against it costs what a real check costs.
const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$bW5lbW8tZHVtbXktc2FsdA$/TsF/C3gTSE3vFVzr/WXobFQWCjD7JPJcJuPycdDmQc";

/// Whether `password` is the one hashed as `stored` (a PHC string). With no stored hash it
/// checks against [`DUMMY`] all the same and answers no; an unreadable stored hash answers no
/// (and is logged, never with the password).
pub(crate) async fn verify(password: Secret, stored: Option<String>) -> bool {
    let known = stored.is_some();
    let checked = tokio::task::spawn_blocking(move || {
        let phc = stored.as_deref().unwrap_or(DUMMY);
        match PasswordHash::new(phc) {
            Ok(parsed) => argon2().verify_password(password.expose().as_bytes(), &parsed).is_ok(),
            Err(e) => {
                tracing::warn!(error = %e, "a stored password hash is unreadable; refusing the sign-in");
                false
            }
        }
    })
    .await;
    known && checked.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_password_verifies_against_its_own_hash_only() {
        let phc = hash(Secret::new("correct horse battery")).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(!phc.contains("correct horse"));
        let parsed = PasswordHash::new(&phc).unwrap();
        assert!(argon2().verify_password(b"correct horse battery", &parsed).is_ok());
        assert!(argon2().verify_password(b"correct horse batterY", &parsed).is_err());
        let again = hash(Secret::new("correct horse battery")).await.unwrap();
        assert_ne!(phc, again, "every hash has its own salt");
    }

    #[tokio::test]
    async fn signing_in_verifies_the_stored_hash_and_never_the_dummy() {
        let phc = hash(Secret::new("correct horse battery")).await.unwrap();
        let cases = [
            // (password, stored hash, verified)
            ("correct horse battery", Some(phc.clone()), true),
            ("correct horse batterY", Some(phc.clone()), false),
            ("", Some(phc.clone()), false),
            ("correct horse battery", None, false),
            ("", None, false),
            ("correct horse battery", Some("not a hash".to_owned()), false),
            ("correct horse battery", Some(DUMMY.to_owned()), false),
        ];
        for (password, stored, verified) in cases {
            assert_eq!(
                verify(Secret::new(password), stored.clone()).await,
                verified,
                "{password:?} against {stored:?}"
            );
        }
    }

    #[test]
    fn the_dummy_costs_what_a_real_hash_costs() {
        let dummy = PasswordHash::new(DUMMY).expect("the dummy is a PHC string");
        let params = Params::try_from(&dummy).unwrap();
        let default = Params::default();
        assert_eq!(dummy.algorithm, argon2::Algorithm::Argon2id.ident());
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (default.m_cost(), default.t_cost(), default.p_cost())
        );
        assert_eq!(dummy.hash.map(|h| h.len()), Some(32), "a full-length digest, like a real one");
    }
}
