//! People's passwords: hashed with argon2id (RFC 9106), kept only as the PHC string
//! (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`), which names its own parameters so they can be raised
//! later without invalidating stored hashes.
//!
//! Argon2id is memory-hard: each guess costs an attacker who stole the database the same memory
//! and time it costs us, which is what makes a 12-character password hold. The parameters are
//! the `argon2` crate's defaults, OWASP's recommendation (19 MiB, 2 passes, 1 lane). Hashing
//! blocks for tens of milliseconds, so it runs on the blocking pool.

use argon2::password_hash::rand_core::OsRng;
#[cfg(test)]
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
}
