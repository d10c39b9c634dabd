//! Who a rate limit counts against, and the name of the limiter object that keeps their bucket.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use shared::UserId;

/// The header in which Cloudflare gives the client's address. Cloudflare sets it on every
/// request and replaces any value the client sent; locally (`wrangler dev`, `workerd`) it is
/// whatever the client sent, or absent.
pub const CLIENT_ADDRESS_HEADER: &str = "cf-connecting-ip";

/// A rate-limited party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requester {
    /// An authenticated user.
    User(UserId),
    /// A client address, before authentication.
    Address(ClientAddress),
}

/// A client address as rate limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAddress {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// The /64 network of an IPv6 address: one subscriber commonly holds a whole /64, so
    /// counting single addresses would give each client 2^64 buckets.
    V6Network(Ipv6Addr),
    /// No usable address (no header, as locally, or not an IP address): one shared bucket.
    Unknown,
}

impl ClientAddress {
    /// The address in the [`CLIENT_ADDRESS_HEADER`] value, if it is one.
    pub fn from_header(value: Option<&str>) -> ClientAddress {
        match value.and_then(|text| text.trim().parse::<IpAddr>().ok()) {
            Some(IpAddr::V4(address)) => ClientAddress::V4(address),
            Some(IpAddr::V6(address)) => match address.to_ipv4_mapped() {
                Some(mapped) => ClientAddress::V4(mapped),
                None => {
                    let network = u128::from(address) & !u128::from(u64::MAX);
                    ClientAddress::V6Network(Ipv6Addr::from(network))
                }
            },
            None => ClientAddress::Unknown,
        }
    }
}

impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientAddress::V4(address) => address.fmt(f),
            ClientAddress::V6Network(network) => write!(f, "{network}/64"),
            ClientAddress::Unknown => f.write_str("unknown"),
        }
    }
}

impl Requester {
    /// The name of the limiter object keeping this requester's bucket: one object per user and
    /// per address, so no two requesters ever share a bucket (but every unknown address does).
    pub fn limiter_name(&self) -> String {
        match self {
            Requester::User(user) => format!("user/{user}"),
            Requester::Address(address) => format!("address/{address}"),
        }
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn address_name(header: Option<&str>) -> String {
        Requester::Address(ClientAddress::from_header(header)).limiter_name()
    }

    #[test]
    fn users_and_addresses_get_objects_of_their_own() {
        let user = UserId::numbered(7);
        assert_eq!(Requester::User(user).limiter_name(), "user/7");
        assert_eq!(address_name(Some("203.0.113.7")), "address/203.0.113.7");
        assert_ne!(
            address_name(Some("203.0.113.7")),
            address_name(Some("203.0.113.8"))
        );
    }

    #[test]
    fn an_ipv6_address_counts_by_its_64_network() {
        assert_eq!(
            address_name(Some("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            "address/2001:db8:1:2::/64"
        );
        assert_eq!(
            address_name(Some("2001:db8:1:2::1")),
            address_name(Some("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            address_name(Some("2001:db8:1:2::1")),
            address_name(Some("2001:db8:1:3::1"))
        );
        assert_eq!(
            address_name(Some("::ffff:203.0.113.7")),
            "address/203.0.113.7"
        );
    }

    #[test]
    fn without_a_usable_address_every_request_shares_one_bucket() {
        for header in [
            None,
            Some(""),
            Some("not-an-ip"),
            Some("203.0.113.7, 10.0.0.1"),
        ] {
            assert_eq!(address_name(header), "address/unknown", "{header:?}");
        }
        assert_eq!(address_name(Some(" 203.0.113.7 ")), "address/203.0.113.7");
    }
}
