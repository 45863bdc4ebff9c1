//! Where the server may connect on a user's behalf: webhook endpoints (the only server-side
//! fetch of a URL an API client gives; model providers come from the operator's file).
//!
//! By default only public addresses: loopback, link-local, private, unique-local, unspecified,
//! CGNAT, multicast, broadcast, documentation and reserved ranges are refused, and so are IPv6
//! forms that embed such an IPv4 address (mapped, compatible, NAT64, 6to4). The judgement is
//! made on the address actually connected to: a name is resolved by [`PublicResolver`], which
//! drops every address that is not public (so a name that resolves to loopback, or rebinds to it
//! between registration and delivery, reaches nothing), and a URL whose host is an IP literal —
//! which reqwest connects to without asking the resolver — is checked by
//! [`WebhookTargets::check_url`] before the request is made. The URL parser has already turned
//! decimal, hex, octal and shortened IPv4 spellings (`2130706433`, `0x7f000001`, `0177.0.0.1`,
//! `127.1`) into the dotted address, so they are literals too.
//!
//! An operator who delivers to their own network says so: `--webhook-allow-private` (anything
//! goes) or `--webhook-allow-hosts` (these host names or IP addresses, whatever they resolve to).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Host;

/// Which webhook targets this server may connect to.
#[derive(Debug, Clone, Default)]
pub struct WebhookTargets {
    /// Any address at all (`--webhook-allow-private`).
    allow_private: bool,
    /// Hosts allowed whatever they resolve to (`--webhook-allow-hosts`).
    allow_hosts: Vec<AllowedHost>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum AllowedHost {
    /// A host name, lowercase, without a trailing dot.
    Name(String),
    Ip(IpAddr),
}

/// Why a target is refused (the message for a registration's `400` and the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "url points at a non-public address ({0}); webhooks reach only public addresses unless the server runs \
         with --webhook-allow-private or --webhook-allow-hosts"
    )]
    Address(IpAddr),
    #[error(
        "url names a local host (`{0}`); webhooks reach only public addresses unless the server runs with \
         --webhook-allow-private or --webhook-allow-hosts"
    )]
    LocalName(String),
    #[error("the endpoint's host resolves to no public address")]
    NoPublicAddress,
    #[error("url has no host")]
    NoHost,
}

impl WebhookTargets {
    /// Public addresses only (the default).
    pub fn public_only() -> Self {
        Self::default()
    }

    /// Allows every address (`true`), as before this check existed.
    pub fn allow_private(mut self, on: bool) -> Self {
        self.allow_private = on;
        self
    }

    /// Allows these hosts (names or IP addresses) whatever they resolve to. A bad entry is an
    /// error that names it.
    pub fn allow_hosts<S: AsRef<str>>(mut self, hosts: &[S]) -> Result<Self, String> {
        for raw in hosts {
            let raw = raw.as_ref().trim();
            if raw.is_empty() {
                continue;
            }
            let bare = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(raw);
            if let Ok(ip) = bare.parse::<IpAddr>() {
                self.allow_hosts.push(AllowedHost::Ip(ip));
                continue;
            }
            // Parsed as a URL's host would be, so `Example.COM` and an IDN compare as the URL's.
            match Url::parse(&format!("http://{raw}/")).ok().and_then(|u| u.host().map(|h| h.to_owned())) {
                Some(Host::Domain(d)) if !raw.contains(['/', ':', '@', '?', '#']) => {
                    self.allow_hosts.push(AllowedHost::Name(normal_name(&d)));
                }
                Some(Host::Ipv4(ip)) if !raw.contains(['/', ':', '@', '?', '#']) => {
                    self.allow_hosts.push(AllowedHost::Ip(IpAddr::V4(ip)));
                }
                _ => {
                    return Err(format!(
                        "`{raw}` is not a host name or IP address (give names like `hooks.internal` or addresses \
                         like `10.0.0.5`, without scheme or port)"
                    ));
                }
            }
        }
        Ok(self)
    }

    /// Whether private targets are allowed, which also makes recorded delivery errors detailed.
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    fn name_allowed(&self, name: &str) -> bool {
        let name = normal_name(name);
        self.allow_hosts.iter().any(|h| matches!(h, AllowedHost::Name(n) if *n == name))
    }

    fn ip_allowed(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.allow_hosts.contains(&AllowedHost::Ip(ip))
    }

    /// What a registration can judge at once: a literal address that is not public, or a name
    /// that is local by definition (`localhost`, `*.localhost`). Other names are judged when a
    /// delivery connects.
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        if self.allow_private {
            return Ok(());
        }
        match url.host().ok_or(Refused::NoHost)? {
            Host::Ipv4(ip) if !self.ip_allowed(IpAddr::V4(ip)) => Err(Refused::Address(IpAddr::V4(ip))),
            Host::Ipv6(ip) if !self.ip_allowed(IpAddr::V6(ip)) => Err(Refused::Address(IpAddr::V6(ip))),
            Host::Domain(name) if is_local_name(name) && !self.name_allowed(name) => {
                Err(Refused::LocalName(name.to_owned()))
            }
            _ => Ok(()),
        }
    }

    /// The resolver of the webhook client: it keeps only the addresses this policy allows.
    pub(crate) fn resolver(self: &Arc<Self>) -> Arc<PublicResolver> {
        Arc::new(PublicResolver { targets: Arc::clone(self) })
    }

    /// The addresses of `name` this policy allows to connect to (all of them for an allowed
    /// host name).
    fn filter(&self, name: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Refused> {
        if self.allow_private || self.name_allowed(name) {
            return Ok(addrs);
        }
        let kept: Vec<SocketAddr> = addrs.into_iter().filter(|a| self.ip_allowed(a.ip())).collect();
        if kept.is_empty() { Err(Refused::NoPublicAddress) } else { Ok(kept) }
    }
}

fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `localhost` and its subdomains always mean this machine (RFC 6761).
fn is_local_name(name: &str) -> bool {
    let name = normal_name(name);
    name == "localhost" || name.ends_with(".localhost")
}

/// Resolves names for the webhook client and drops every address its policy refuses, so the
/// client can only ever connect to an allowed one (whatever the name resolved to at
/// registration, and whatever it resolves to next time).
#[derive(Debug)]
pub(crate) struct PublicResolver {
    targets: Arc<WebhookTargets>,
}

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let targets = Arc::clone(&self.targets);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept = targets.filter(&host, addrs)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// Whether `ip` is a public unicast address: the only kind a webhook may reach by default.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                   // "this network", 0.0.0.0 included
        || a == 10                             // private
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || a == 127                            // loopback
        || (a == 169 && b == 254)              // link-local (cloud metadata)
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)      // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)      // TEST-NET-1
        || (a == 192 && b == 88 && c == 99)    // 6to4 relay anycast
        || (a == 192 && b == 168)              // private
        || (a == 198 && (b == 18 || b == 19))  // benchmarking
        || (a == 198 && b == 51 && c == 100)   // TEST-NET-2
        || (a == 203 && b == 0 && c == 113)    // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        // Unspecified, loopback, and IPv4-compatible addresses (deprecated, but still an IPv4
        // address to a dual-stack socket).
        [0, 0, 0, 0, 0, 0, hi, lo] => !ip.is_unspecified() && !ip.is_loopback() && is_public_v4(embedded(hi, lo)),
        // IPv4-mapped: the connection goes to the IPv4 address.
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => is_public_v4(embedded(hi, lo)),
        // IPv4-translated (SIIT).
        [0, 0, 0, 0, 0xffff, 0, _, _] => false,
        // NAT64 well-known prefix: a gateway turns it into the IPv4 address.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => is_public_v4(embedded(hi, lo)),
        // Local-use NAT64 (64:ff9b:1::/48).
        [0x64, 0xff9b, 1, ..] => false,
        // Discard-only (100::/64).
        [0x100, 0, 0, 0, ..] => false,
        // 6to4: the relay turns it into the embedded IPv4 address.
        [0x2002, hi, lo, ..] => is_public_v4(embedded(hi, lo)),
        // Teredo (2001::/32) hides an IPv4 address; documentation (2001:db8::/32).
        [0x2001, 0, ..] | [0x2001, 0xdb8, ..] => false,
        // Unique-local fc00::/7, link-local fe80::/10, site-local fec0::/10, multicast ff00::/8.
        [first, ..] => {
            !((first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
                || (first & 0xff00) == 0xff00)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_are_public() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "::ffff:0:7f00:1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "2001::1",
            "2001:db8::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ];
        for ip in refused {
            assert!(!is_public(ip.parse().unwrap()), "{ip} must not be public");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.254",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
        ];
        for ip in public {
            assert!(is_public(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[test]
    fn every_spelling_of_a_private_host_is_refused_at_registration() {
        let targets = WebhookTargets::public_only();
        let refused = [
            "http://127.0.0.1/hook",
            "http://127.1/hook",
            "http://2130706433/hook",
            "http://0x7f000001/hook",
            "http://0177.0.0.1/hook",
            "http://0x7f.1/hook",
            "http://[::1]/hook",
            "http://[::ffff:127.0.0.1]/hook",
            "http://[0:0:0:0:0:ffff:7f00:1]/hook",
            "http://0.0.0.0/hook",
            "http://0/hook",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.1.2.3/hook",
            "http://192.168.0.1:8080/hook",
            "https://[fd00::1]/hook",
            "http://localhost:9/hook",
            "http://LOCALHOST./hook",
            "http://api.localhost/hook",
        ];
        for raw in refused {
            let url = Url::parse(raw).unwrap();
            assert!(targets.check_url(&url).is_err(), "{raw} must be refused");
        }
        for raw in ["https://example.com/hook", "http://8.8.8.8/hook", "https://[2606:4700::1]/x", "http://intranet/"] {
            assert_eq!(targets.check_url(&Url::parse(raw).unwrap()), Ok(()), "{raw} is judged at delivery or public");
        }
        let open = WebhookTargets::public_only().allow_private(true);
        assert_eq!(open.check_url(&Url::parse("http://127.0.0.1/x").unwrap()), Ok(()));
        let listed = WebhookTargets::public_only().allow_hosts(&["127.0.0.1", "[::1]", "Hooks.Internal."]).unwrap();
        assert_eq!(listed.check_url(&Url::parse("http://127.1:9/x").unwrap()), Ok(()));
        assert_eq!(listed.check_url(&Url::parse("http://[::1]:9/x").unwrap()), Ok(()));
        assert!(listed.check_url(&Url::parse("http://127.0.0.2/x").unwrap()).is_err());
        assert!(WebhookTargets::public_only().allow_hosts(&["http://x/"]).is_err());
        assert!(WebhookTargets::public_only().allow_hosts(&["x:80"]).is_err());
    }

    #[test]
    fn the_resolver_keeps_only_allowed_addresses() {
        let addr = |s: &str| SocketAddr::new(s.parse().unwrap(), 0);
        let targets = WebhookTargets::public_only();
        assert_eq!(
            targets.filter("rebind.example", vec![addr("127.0.0.1"), addr("::1")]),
            Err(Refused::NoPublicAddress),
            "a name resolving only to loopback reaches nothing"
        );
        assert_eq!(
            targets.filter("mixed.example", vec![addr("10.0.0.1"), addr("8.8.8.8"), addr("::ffff:127.0.0.1")]),
            Ok(vec![addr("8.8.8.8")]),
            "private answers are dropped, public ones kept"
        );
        let listed = WebhookTargets::public_only().allow_hosts(&["hooks.internal", "10.0.0.9"]).unwrap();
        assert_eq!(listed.filter("HOOKS.internal.", vec![addr("10.0.0.1")]), Ok(vec![addr("10.0.0.1")]));
        assert_eq!(
            listed.filter("other.internal", vec![addr("10.0.0.9"), addr("10.0.0.1")]),
            Ok(vec![addr("10.0.0.9")])
        );
        let open = WebhookTargets::public_only().allow_private(true);
        assert_eq!(open.filter("x", vec![addr("127.0.0.1")]), Ok(vec![addr("127.0.0.1")]));
    }

    #[tokio::test]
    async fn localhost_resolves_to_nothing_reachable() {
        let resolver = Arc::new(WebhookTargets::public_only()).resolver();
        let err = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e,
        };
        assert_eq!(err.to_string(), Refused::NoPublicAddress.to_string());
    }
}
